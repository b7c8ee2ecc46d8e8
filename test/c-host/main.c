/*
 * A native host of the api-auth token core: build/core.wasm translated to C by wasm2c
 * (wabt 1.0.32, Debian 12's `wabt`), driven through its exports exactly as the JavaScript
 * host drives it. It runs the shared conformance vectors (test/vectors/core-vectors.txt)
 * and prints "N passed, M failed"; the exit code is 0 only when every case passed.
 *
 *   make -C test/c-host && build/c-host/core-vectors test/vectors/core-vectors.txt
 *
 * The ABI it speaks is in assembly/README.md. Every case runs on a fresh instance.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "wasm-rt-impl.h"
#include "result-record.h"

enum { VALID = 0, MALFORMED = 1, BAD_HEADER = 8, BAD_PATH = 9, TOKEN_LENGTH = 76 };

/* The one import, env.abort, gets this as its instance. */
struct Z_env_instance_t {
  Z_core_instance_t *core;
};

static Z_core_instance_t core;
static struct Z_env_instance_t env = {&core};
/* Exchange buffers: addresses and capacities, read once per instance. */
static uint32_t token_ptr, token_cap, path_ptr, path_cap, io_ptr, io_cap, result_ptr;

static const char *case_name;
static int case_failed;

static void fail(const char *format, ...) {
  va_list args;
  va_start(args, format);
  if (!case_failed) fprintf(stderr, "FAIL %s\n", case_name);
  fputs("  ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  case_failed = 1;
}

/* The memory may grow (grants), so its data is looked up on every access. */
static uint8_t *mem(void) { return Z_coreZ_memory(&core)->data; }

static uint64_t load_le(uint32_t ptr, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--) v = v << 8 | mem()[ptr + i];
  return v;
}

/* abort(message, file, line, column): AssemblyScript strings are UTF-16LE, their byte
 * length in the u32 before them. Called only on a broken invariant: trap out of the case. */
void Z_envZ_abort(struct Z_env_instance_t *e, u32 message, u32 file, u32 line, u32 column) {
  (void)e;
  fprintf(stderr, "core abort at %u:%u: ", line, column);
  for (uint32_t p = message, n = message ? (uint32_t)load_le(message - 4, 4) : 0; p < message + n; p += 2) {
    fputc(mem()[p] < 0x80 ? mem()[p] : '?', stderr);
  }
  (void)file;
  fputc('\n', stderr);
  wasm_rt_trap(WASM_RT_TRAP_UNREACHABLE);
}

/* Bytes from the vectors file: lowercase hex, or "-" for none. */
typedef struct {
  uint8_t *data;
  size_t len;
} bytes_t;

static bytes_t hex(const char *text) {
  bytes_t b = {NULL, 0};
  if (text == NULL || strcmp(text, "-") == 0) return b;
  size_t n = strlen(text) / 2;
  b.data = malloc(n ? n : 1);
  for (size_t i = 0; i < n; i++) sscanf(text + 2 * i, "%2hhx", &b.data[i]);
  b.len = n;
  return b;
}

/* Writes what fits into a buffer and returns the full length: the core itself refuses a
 * length over the buffer's capacity without reading (BadPath, Malformed). */
static uint32_t put(uint32_t ptr, uint32_t cap, bytes_t b) {
  memcpy(mem() + ptr, b.data, b.len < cap ? b.len : cap);
  return (uint32_t)b.len;
}

/* The gate: a header longer than the token buffer goes in with its true length and as
 * much as fits; the core reads its scheme and calls the rest Malformed. */
static uint32_t authorize(bytes_t header, bytes_t path, int64_t now) {
  uint32_t path_len = put(path_ptr, path_cap, path);
  return Z_coreZ_authorize(&core, put(token_ptr, token_cap, header), path_len, (u64)now);
}

static void expect_claims(char **f, int n, const char *what) {
  if (n < 4) return;
  uint64_t serial = load_le(result_ptr + RESULT_SERIAL, 8), expiry = load_le(result_ptr + RESULT_EXPIRY, 8);
  uint32_t generation = (uint32_t)load_le(result_ptr + RESULT_GENERATION, 4), grant = (uint32_t)load_le(result_ptr + RESULT_GRANT, 4);
  if (serial != strtoull(f[0], NULL, 10) || expiry != strtoull(f[1], NULL, 10) ||
      generation != strtoul(f[2], NULL, 10) || grant != strtoul(f[3], NULL, 10)) {
    fail("%s: claims %" PRIu64 " %" PRIu64 " %u %u, not %s %s %s %s", what, serial, expiry, generation, grant, f[0], f[1],
         f[2], f[3]);
  }
}

static void expect_int(long long got, const char *expected, const char *what) {
  if (got != strtoll(expected, NULL, 10)) fail("%s: %lld, not %s", what, got, expected);
}

static void expect_bytes(uint32_t ptr, const char *expected_hex, const char *what) {
  bytes_t e = hex(expected_hex);
  if (memcmp(mem() + ptr, e.data, e.len) != 0) fail("%s: other bytes than %s", what, expected_hex);
  free(e.data);
}

/* One command of a case; f[0] is its name, n the number of fields. */
static void command(char **f, int n) {
  const char *c = f[0];
  if (strcmp(c, "init") == 0) {
    expect_int((int32_t)Z_coreZ_init(&core, strtoul(f[1], NULL, 10)), "0", "init");
  } else if (strcmp(c, "key") == 0) {
    bytes_t key = hex(f[1]);
    expect_int((int32_t)Z_coreZ_setKey(&core, put(io_ptr, io_cap, key)), "0", "setKey");
    free(key.data);
  } else if (strcmp(c, "generation") == 0) {
    Z_coreZ_setGeneration(&core, strtoul(f[1], NULL, 10));
  } else if (strcmp(c, "grant") == 0 || strcmp(c, "grant-refused") == 0) {
    bytes_t list = hex(f[1]);
    int32_t id = (int32_t)Z_coreZ_grantAdd(&core, put(io_ptr, io_cap, list));
    expect_int(id, f[2], "grantAdd");
    if (n > 3 && strcmp(f[3], "-") != 0 && id < 0) expect_int((int64_t)load_le(result_ptr + RESULT_REFUSED_ENTRY, 4), f[3], "refused entry");
    free(list.data);
  } else if (strcmp(c, "issue") == 0 || strcmp(c, "issue-refused") == 0) {
    int32_t len = (int32_t)Z_coreZ_issue(&core, strtoul(f[1], NULL, 10), (u64)strtoll(f[2], NULL, 10), strtoul(f[3], NULL, 10));
    if (strcmp(c, "issue-refused") == 0) {
      expect_int(len, f[4], "issue refused");
    } else if (len != TOKEN_LENGTH || memcmp(mem() + token_ptr, f[4], TOKEN_LENGTH) != 0) {
      fail("issue: %d bytes, not the token %s", len, f[4]);
    } else {
      expect_claims(f + 5, n - 5, "issue");
    }
  } else if (strcmp(c, "revoke") == 0) {
    bytes_t token = hex(f[1]);
    uint32_t outcome = Z_coreZ_revoke(&core, put(token_ptr, token_cap, token), (u64)strtoll(f[2], NULL, 10));
    expect_int(outcome, f[3], "revoke");
    expect_claims(f + 4, n - 4, "revoke");
    free(token.data);
  } else if (strcmp(c, "bump") == 0) {
    expect_int(Z_coreZ_bumpGeneration(&core), f[1], "bumpGeneration");
  } else if (strcmp(c, "restore") == 0) {
    int32_t r = (int32_t)Z_coreZ_restoreSerials(&core, strtoull(f[1], NULL, 10), strtoull(f[2], NULL, 10), strtoull(f[3], NULL, 10));
    expect_int(r, f[4], "restoreSerials");
  } else if (strcmp(c, "revoke-serial") == 0) {
    expect_int((int32_t)Z_coreZ_revokeSerial(&core, strtoull(f[1], NULL, 10)), f[2], "revokeSerial");
  } else if (strcmp(c, "sweep") == 0) {
    Z_coreZ_sweep(&core, (u64)strtoll(f[1], NULL, 10));
  } else if (strcmp(c, "authorize") == 0) {
    bytes_t header = hex(f[1]), path = hex(f[2]);
    expect_int(authorize(header, path, strtoll(f[3], NULL, 10)), f[4], "authorize");
    if (n > 5) expect_int((int64_t)load_le(result_ptr + RESULT_GRANT, 4), f[5], "authorize: Scoped or Limited grant");
    if (n > 6) expect_int((int64_t)load_le(result_ptr + RESULT_SERIAL, 8), f[6], "authorize: Limited serial");
    if (n > 7) expect_int((int64_t)load_le(result_ptr + RESULT_EXPIRY, 8), f[7], "authorize: Limited expiry");
    free(header.data);
    free(path.data);
  } else if (strcmp(c, "verify") == 0) {
    bytes_t token = hex(f[1]), path = hex(f[2]);
    uint32_t token_len = put(token_ptr, token_cap, token), path_len = put(path_ptr, path_cap, path);
    expect_int(Z_coreZ_verify(&core, token_len, path_len, (u64)strtoll(f[3], NULL, 10)), f[4], "verify");
    if (n > 5) expect_int((int64_t)load_le(result_ptr + RESULT_GRANT, 4), f[5], "verify: Scoped or Limited grant");
    if (n > 6) expect_int((int64_t)load_le(result_ptr + RESULT_SERIAL, 8), f[6], "verify: Limited serial");
    if (n > 7) expect_int((int64_t)load_le(result_ptr + RESULT_EXPIRY, 8), f[7], "verify: Limited expiry");
    free(token.data);
    free(path.data);
  } else if (strcmp(c, "admit") == 0) {
    /* admit <serial> <expiry> <grant> <calls> <now ns> <client hex> <result> <wait ns>: the client in the io buffer. */
    bytes_t client = hex(f[6]);
    put(io_ptr, io_cap, client);
    int32_t r = (int32_t)Z_coreZ_admit(&core, strtoull(f[1], NULL, 10), strtoull(f[2], NULL, 10), strtoul(f[3], NULL, 10),
                                       strtoul(f[4], NULL, 10), (u64)strtoll(f[5], NULL, 10));
    expect_int(r, f[7], "admit");
    if (r == 2 || r == 4) expect_int((int64_t)load_le(result_ptr + RESULT_WAIT, 8), f[8], "admit: wait");
    free(client.data);
  } else if (strcmp(c, "share") == 0) {
    expect_int((int32_t)Z_coreZ_setLimitShare(&core, strtoul(f[1], NULL, 10)), "0", "setLimitShare");
  } else if (strcmp(c, "usage") == 0) {
    /* usage <serial> <found> <requests> <last ns> */
    int32_t found = (int32_t)Z_coreZ_usage(&core, strtoull(f[1], NULL, 10));
    expect_int(found, f[2], "usage");
    if (found == 1) {
      expect_int((int64_t)load_le(result_ptr + RESULT_REQUESTS, 8), f[3], "usage: requests");
      expect_int((int64_t)load_le(result_ptr + RESULT_LAST_USED, 8), f[4], "usage: last");
    }
  } else if (strcmp(c, "method") == 0) {
    /* The method name goes in the path buffer; one longer than it, with its true length. */
    bytes_t name = hex(f[2]);
    int32_t allowed = (int32_t)Z_coreZ_methodAllowed(&core, strtoul(f[1], NULL, 10), put(path_ptr, path_cap, name));
    expect_int(allowed, f[3], "methodAllowed");
    free(name.data);
  } else if (strcmp(c, "sha256") == 0) {
    bytes_t message = hex(f[1]);
    Z_coreZ_sha256(&core, put(io_ptr, io_cap, message));
    expect_bytes(result_ptr + RESULT_DIGEST, f[2], "sha256");
    free(message.data);
  } else if (strcmp(c, "hmac") == 0) {
    /* The key, then the message, in the io buffer. */
    bytes_t key = hex(f[1]), message = hex(f[2]);
    if (key.len + message.len > io_cap) {
      fail("hmac: key and message exceed the io buffer");
    } else {
      memcpy(mem() + io_ptr, key.data, key.len);
      memcpy(mem() + io_ptr + key.len, message.data, message.len);
      Z_coreZ_hmacSha256(&core, (uint32_t)key.len, (uint32_t)message.len);
      expect_bytes(result_ptr + RESULT_DIGEST, f[3], "hmacSha256");
    }
    free(key.data);
    free(message.data);
  } else if (strcmp(c, "password") == 0) {
    /* password <length> <expected> <draw>...: each draw but the last runs out (-1). */
    uint32_t length = strtoul(f[1], NULL, 10);
    for (int i = 3; i < n; i++) {
      bytes_t draw = hex(f[i]);
      int32_t r = (int32_t)Z_coreZ_generatePassword(&core, put(io_ptr, io_cap, draw), length);
      free(draw.data);
      if (r != (i == n - 1 ? (int32_t)length : -1)) fail("generatePassword with draw %d: %d", i - 2, r);
    }
    if (memcmp(mem() + token_ptr, f[2], length) != 0) fail("generatePassword: not %s", f[2]);
  } else {
    fail("unknown command %s", c);
  }
}

/* Splits a line into space-separated fields, in place. */
static int split(char *line, char **fields, int max) {
  int n = 0;
  for (char *p = strtok(line, " \n"); p != NULL && n < max; p = strtok(NULL, " \n")) fields[n++] = p;
  return n;
}

/* Runs one case, from the line after `case <name>` to its `end`, on a fresh instance.
 * A trap (an abort or a broken invariant) fails the case and skips to its end. */
static int run_case(FILE *in, char **line, size_t *cap) {
  static char *fields[64];
  Z_core_instantiate(&core, &env);
  case_failed = 0;
  token_ptr = Z_coreZ_tokenBuffer(&core);
  token_cap = Z_coreZ_tokenCapacity(&core);
  path_ptr = Z_coreZ_pathBuffer(&core);
  path_cap = Z_coreZ_pathCapacity(&core);
  io_ptr = Z_coreZ_ioBuffer(&core);
  io_cap = Z_coreZ_ioCapacity(&core);
  result_ptr = Z_coreZ_resultBuffer(&core);
  wasm_rt_trap_t trap = wasm_rt_impl_try();
  if (trap != WASM_RT_TRAP_NONE) fail("trapped: %s", wasm_rt_strerror(trap));
  while (getline(line, cap, in) > 0) {
    if (strcmp(*line, "end\n") == 0) break;
    if (trap != WASM_RT_TRAP_NONE) continue;
    int n = split(*line, fields, 64);
    if (n > 0) command(fields, n);
  }
  Z_core_free(&core);
  return !case_failed;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s test/vectors/core-vectors.txt\n", argv[0]);
    return 2;
  }
  FILE *in = fopen(argv[1], "r");
  if (in == NULL) {
    perror(argv[1]);
    return 2;
  }
  wasm_rt_init();
  Z_core_init_module();

  char *line = NULL;
  size_t cap = 0;
  long declared = -1, passed = 0, failed = 0;
  while (getline(&line, &cap, in) > 0) {
    if (line[0] == '#' || line[0] == '\n') continue;
    if (strncmp(line, "abi ", 4) == 0) {
      Z_core_instantiate(&core, &env);
      uint32_t abi = Z_coreZ_abiVersion(&core);
      Z_core_free(&core);
      if (abi != strtoul(line + 4, NULL, 10)) {
        fprintf(stderr, "the core speaks ABI %u, the vectors are for ABI %s", abi, line + 4);
        return 1;
      }
    } else if (strncmp(line, "cases ", 6) == 0) {
      declared = strtol(line + 6, NULL, 10);
    } else if (strncmp(line, "case ", 5) == 0) {
      line[strcspn(line, "\n")] = '\0';
      char *name = strdup(line + 5);
      case_name = name;
      if (run_case(in, &line, &cap)) passed++; else failed++;
      free(name);
    } else {
      fprintf(stderr, "unexpected line outside a case: %s", line);
      failed++;
    }
  }
  free(line);
  fclose(in);
  wasm_rt_free();
  if (declared != passed + failed) {
    fprintf(stderr, "the file declares %ld cases, %ld ran\n", declared, passed + failed);
    failed++;
  }
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
