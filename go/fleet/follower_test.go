package fleet

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"api-auth/go/core"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

const rpcPath = "/ext/bc/C/rpc"

// writer writes the fleet's keys as an api-auth gateway does (host/cluster/fleet.ts,
// docs/fleet-keys.md), with a core of its own to issue from, and waits for the barrier
// as a gateway's change does before it answers.
type writer struct {
	t      *testing.T
	cli    *clientv3.Client
	core   *core.Core
	prefix string
}

func newWriter(t *testing.T, e *etcdServer) *writer {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	c, err := core.New(context.Background(), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return &writer{t, cli, c, "/api-auth/"}
}

func (w *writer) put(key, value string) int64 {
	w.t.Helper()
	ctx, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	r, err := w.cli.Put(ctx, w.prefix+key, value)
	if err != nil {
		w.t.Fatal(err)
	}
	return r.Header.Revision
}

// seed is a first gateway's seed, and the block and grants it issues from.
func (w *writer) seed(now int64, grants ...[]string) {
	key := make([]byte, 32)
	rand.Read(key)
	w.core.SetKey(key)
	w.put("key", base64.StdEncoding.EncodeToString(key))
	w.put("password", `{"record":"$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA","generation":0}`)
	w.core.RestoreSerials(0, 0, 0)
	w.block(0, now)
	for _, entries := range grants {
		w.grant(entries)
	}
}

func (w *writer) grant(entries []string) uint32 {
	id, err := w.core.AddGrant(entries)
	if err != nil {
		w.t.Fatal(err)
	}
	list, _ := json.Marshal(entries)
	w.barrier(w.put(fmt.Sprintf("grants/%010d", id), string(list)))
	return id
}

func (w *writer) block(start uint64, now int64) {
	bound := uint64(now) + 3600 + 43200
	w.core.ReserveSerials(start, start+4096, bound)
	w.put("serials", fmt.Sprint(start+4096))
	w.barrier(w.put(fmt.Sprintf("blocks/%016d", start), fmt.Sprintf(`{"end":%d,"bound":%d}`, start+4096, bound)))
}

func (w *writer) issue(serial uint64, grant uint32, now int64) (string, core.Claims) {
	token, claims, err := w.core.IssueSerial(serial, grant, now, 3600)
	if err != nil {
		w.t.Fatal(err)
	}
	return token, claims
}

func (w *writer) revoke(claims core.Claims) {
	w.barrier(w.put(fmt.Sprintf("revoked/%016d", claims.Serial), fmt.Sprint(claims.Expiry)))
}

// barrier waits until every live member published a revision at least rev, or left.
func (w *writer) barrier(rev int64) {
	w.t.Helper()
	for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(2 * time.Millisecond) {
		r, err := w.cli.Get(context.Background(), w.prefix+"members/", clientv3.WithPrefix())
		if err != nil {
			continue
		}
		behind := false
		for _, kv := range r.Kvs {
			c, err := Decode(strings.TrimPrefix(string(kv.Key), w.prefix), kv.Value)
			if err != nil {
				w.t.Fatal(err)
			}
			behind = behind || c.Member.Applied < rev
		}
		if !behind {
			return
		}
	}
	w.t.Fatalf("the members did not acknowledge revision %d", rev)
}

func quiet() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

func join(t *testing.T, e *etcdServer, lease time.Duration) *Follower {
	t.Helper()
	ctx, done := context.WithTimeout(context.Background(), 30*time.Second)
	defer done()
	f, err := Join(ctx, Options{Endpoints: []string{e.url}, Lease: lease, Readers: 2, WindowLog2: 22, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func outcome(t *testing.T, f *Follower, token string, now int64) core.Outcome {
	t.Helper()
	r, err := f.Verifier().Verify(token, rpcPath, now)
	if err != nil {
		t.Fatal(err)
	}
	return r.Outcome
}

func TestTheFollowerLoadsTheFleetsStateAndFollowsIt(t *testing.T) {
	e := startEtcd(t)
	w := newWriter(t, e)
	now := time.Now().Unix()
	w.seed(now, []string{rpcPath}, []string{rpcPath, "", "eth_get*"})
	valid, _ := w.issue(0, 0, now)
	revoked, revokedClaims := w.issue(1, 0, now)
	scoped, _ := w.issue(2, 1, now)
	w.revoke(revokedClaims)

	f := join(t, e, 10*time.Second)
	if !f.Serving(time.Now()) {
		t.Fatal("not serving once joined")
	}
	if o := outcome(t, f, valid, now); o != core.Valid {
		t.Errorf("a token of the fleet: %v", o)
	}
	if o := outcome(t, f, revoked, now); o != core.Revoked {
		t.Errorf("a token revoked before the join: %v", o)
	}
	r, _ := f.Verifier().Verify(scoped, rpcPath, now)
	allowed, _ := f.Verifier().MethodAllowed(r.Grant, "eth_getBalance")
	refused, _ := f.Verifier().MethodAllowed(r.Grant, "eth_sendRawTransaction")
	if r.Outcome != core.Scoped || !allowed || refused {
		t.Errorf("a scoped token: %v, eth_getBalance %v, eth_sendRawTransaction %v", r, allowed, refused)
	}

	// Changes after the join: each is in force as soon as its barrier ended.
	for round := uint64(0); round < 20; round++ {
		token, claims := w.issue(10+round, 0, now)
		if o := outcome(t, f, token, now); o != core.Valid {
			t.Fatalf("round %d: a fresh token: %v", round, o)
		}
		w.revoke(claims)
		if o := outcome(t, f, token, now); o != core.Revoked {
			t.Fatalf("round %d: %v as the revoke's barrier ended", round, o)
		}
	}
	id := w.grant([]string{"/ext/info"})
	info, _, _ := w.core.IssueSerial(40, id, now, 3600)
	if r, _ := f.Verifier().Verify(info, "/ext/info", now); r.Outcome != core.Valid {
		t.Errorf("a grant added after the join: %v", r)
	}
	w.barrier(w.put("password", `{"record":"$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$b3RoZXI","generation":1}`))
	if o := outcome(t, f, valid, now); o != core.EarlierGeneration {
		t.Errorf("a token of the password before a change: %v", o)
	}
	w.block(4096, now)
	w.core.BumpGeneration()
	later, _ := w.issue(4096, 0, now)
	if o := outcome(t, f, later, now); o != core.Valid {
		t.Errorf("a token of a new block and generation: %v", o)
	}
}

func TestTheMemberKeyIsOneAGatewayReads(t *testing.T) {
	e := startEtcd(t)
	w := newWriter(t, e)
	w.seed(time.Now().Unix(), []string{rpcPath})
	f := join(t, e, 4*time.Second)
	r, err := w.cli.Get(context.Background(), "/api-auth/members/", clientv3.WithPrefix())
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("%v %v", r, err)
	}
	kv := r.Kvs[0]
	if kv.Lease == 0 || string(kv.Key) != "/api-auth/"+MemberName(kv.Lease) {
		t.Errorf("the member key %s is not members/<its lease in hex> under its lease %x", kv.Key, kv.Lease)
	}
	var v map[string]any
	if err := json.Unmarshal(kv.Value, &v); err != nil || len(v) != 3 || v["applied"] == nil || v["follower"] != true || v["limitShare"] != true {
		t.Errorf("the member value %s is not {\"applied\": N, \"follower\": true, \"limitShare\": true}", kv.Value)
	}
	f.Close()
	// Leaving gives the lease back: no writer waits for a node that left.
	r, _ = w.cli.Get(context.Background(), "/api-auth/members/", clientv3.WithPrefix())
	if len(r.Kvs) != 0 {
		t.Errorf("the member key outlived Close: %s", r.Kvs[0].Key)
	}
}

func TestWithEtcdDownItServesUntilTheLeaseLapsesThenRecovers(t *testing.T) {
	e := startEtcd(t)
	w := newWriter(t, e)
	now := time.Now().Unix()
	w.seed(now, []string{rpcPath})
	token, claims := w.issue(0, 0, now)
	lease := 2 * time.Second
	f := join(t, e, lease)
	e.kill()
	killed := time.Now()
	// No renewal can succeed now: whatever the timers do, the lease time past now is fenced.
	if f.Serving(killed.Add(lease)) {
		t.Fatal("serving a lease time after etcd was killed")
	}
	waitFor(t, "the fence to close", func() bool { return !f.Serving(time.Now()) })
	e.start()
	waitFor(t, "serving again once etcd is back", func() bool { return f.Serving(time.Now()) })
	w.revoke(claims)
	if o := outcome(t, f, token, now); o != core.Revoked {
		t.Errorf("a revoke after the recovery: %v", o)
	}
}

func TestAJoinToAnEmptyFleetSaysWhy(t *testing.T) {
	e := startEtcd(t)
	ctx, done := context.WithTimeout(context.Background(), 30*time.Second)
	defer done()
	_, err := Join(ctx, Options{Endpoints: []string{e.url}, Log: quiet(), WindowLog2: 12})
	var fe *Error
	if !errors.As(err, &fe) || fe.Code != "FLEET_STATE" || !strings.Contains(err.Error(), "no api-auth gateway has seeded it") {
		t.Errorf("%v", err)
	}
	if _, err := Join(ctx, Options{Endpoints: []string{e.url}, Lease: time.Second}); err == nil || !strings.Contains(err.Error(), "FLEET_BAD_LEASE") {
		t.Errorf("a lease of 1 s: %v", err)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 60*time.Second; time.Sleep(20 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("gave up waiting for %s", what)
}

// When a session ends (a watch error, a lost lease, Close), the node stops serving before
// it gives its lease back: once its member key is gone a writer's barrier no longer waits
// for it, so from then on it must answer 503. The test sees the key's deletion only after
// etcd applied the revoke, which the follower sends only after closing its fence.
func TestTheFenceClosesBeforeTheMemberKeyGoes(t *testing.T) {
	e := startEtcd(t)
	w := newWriter(t, e)
	w.seed(time.Now().Unix(), []string{rpcPath})
	for round := 0; round < 20; round++ {
		f := join(t, e, 4*time.Second)
		if !f.Serving(time.Now()) {
			t.Fatal("the follower does not serve after its join")
		}
		ctx, cancel := context.WithCancel(context.Background())
		watch := w.cli.Watch(ctx, "/api-auth/members/", clientv3.WithPrefix())
		// The watch is in place once a put under its prefix comes through.
		w.put("members/probe", "{}")
		<-watch
		closed := make(chan struct{})
		go func() { f.Close(); close(closed) }()
		gone := false
		for res := range watch {
			for _, ev := range res.Events {
				if ev.Type == clientv3.EventTypeDelete && string(ev.Kv.Key) != "/api-auth/members/probe" {
					gone = true
					if f.Serving(time.Now()) {
						t.Fatalf("round %d: the member key %s is gone while the follower still serves", round, ev.Kv.Key)
					}
				}
			}
			if gone {
				break
			}
		}
		cancel()
		<-closed
		w.cli.Delete(context.Background(), "/api-auth/members/probe")
	}
}

// A damaged inventory entry, or a key no gateway writes, is none of a verifier's
// business: it keeps serving, and a node joins past it, as the gateways do. A damaged revocation is: the node stops serving, and serves again
// by itself once the key is deleted, with every change made meanwhile.
func TestADamagedKeyFencesItOnlyWhenVerificationNeedsItUntilItIsGone(t *testing.T) {
	e := startEtcd(t)
	w := newWriter(t, e)
	now := time.Now().Unix()
	w.seed(now, []string{rpcPath})
	f := join(t, e, 4*time.Second)
	token, claims := w.issue(0, 0, now)
	later, _ := w.issue(1, 0, now)
	w.put("elsewhere", "no version of api-auth writes this")
	w.barrier(w.put("tokens/0000000000099999", "garbage"))
	if !f.Serving(time.Now()) || outcome(t, f, token, now) != core.Valid {
		t.Fatal("a damaged inventory entry stopped the follower")
	}
	join(t, e, 4*time.Second)
	w.put("revoked/0000000000099999", "garbage")
	waitFor(t, "the fence to close on a damaged revocation", func() bool { return !f.Serving(time.Now()) })
	w.revoke(claims)
	if _, err := w.cli.Delete(context.Background(), "/api-auth/revoked/0000000000099999"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "serving again once the key is gone", func() bool { return f.Serving(time.Now()) })
	if o := outcome(t, f, token, now); o != core.Revoked {
		t.Errorf("the revoke made while fenced: %v", o)
	}
	if o := outcome(t, f, later, now); o != core.Valid {
		t.Errorf("another token: %v", o)
	}
}
