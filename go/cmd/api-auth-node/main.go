// Command api-auth-node is a Go node's JSON-RPC endpoint behind api-auth's tokens, checked
// in-process: it joins an api-auth fleet on etcd as a follower and guards its handler with
// the gate middleware. Every line it writes is JSON, on stdout.
//
//	api-auth-node --cluster-etcd http://127.0.0.1:2379 --http-port 9650
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"api-auth/go/fleet"
	"api-auth/go/gate"
)

func main() {
	// One JSON object a line, on stdout, as api-auth logs.
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	os.Exit(run(log, os.Args[1:]))
}

func run(log *slog.Logger, args []string) int {
	flags := flag.NewFlagSet("api-auth-node", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	etcd := flags.String("cluster-etcd", "", "etcd client URLs of the api-auth fleet, comma-separated (required)")
	name := flags.String("cluster-name", "api-auth", "the fleet's name, its key prefix")
	lease := flags.Duration("cluster-lease", 10*time.Second, "this node's lease in the fleet, 2s to 300s")
	host := flags.String("http-host", "127.0.0.1", "address to listen on")
	port := flags.Int("http-port", 9650, "port to listen on (0: any free port)")
	path := flags.String("rpc-path", "/ext/bc/C/rpc", "the JSON-RPC endpoint's path")
	unguarded := flags.Bool("unguarded", false, "serve without the middleware (to measure what it costs; never in production)")
	caFile := flags.String("cluster-etcd-ca", "", "PEM bundle of the CAs that may sign etcd's certificate (https:// URLs; default the system's)")
	certFile := flags.String("cluster-etcd-cert", "", "client certificate to show etcd (PEM), with --cluster-etcd-key")
	keyFile := flags.String("cluster-etcd-key", "", "its private key (PEM)")
	user := flags.String("cluster-etcd-user", "", "etcd user to sign in as, with --cluster-etcd-password-file")
	passwordFile := flags.String("cluster-etcd-password-file", "", "file holding that user's password")
	if err := flags.Parse(args); err != nil {
		log.Error("bad command line: "+err.Error()+"; see docs/reference/go.md for the flags", "code", "USAGE")
		return 2
	}
	if flags.NArg() > 0 {
		log.Error("bad command line: unexpected argument "+flags.Arg(0), "code", "USAGE")
		return 2
	}
	if *etcd == "" {
		log.Error("bad command line: --cluster-etcd is required (the etcd URLs of the api-auth fleet)", "code", "USAGE")
		return 2
	}
	secured, err := etcdAccess(*etcd, *caFile, *certFile, *keyFile, *user, *passwordFile)
	if err != nil {
		log.Error("bad command line: "+err.Error(), "code", "USAGE")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	joinCtx, cancel := context.WithTimeout(ctx, 2**lease+time.Second)
	follower, err := fleet.Join(joinCtx, fleet.Options{Endpoints: strings.Split(*etcd, ","), Name: *name, Lease: *lease, Log: log,
		TLS: secured.tls, Username: *user, Password: secured.password})
	cancel()
	if err != nil {
		log.Error("cannot join the fleet: "+err.Error(), "code", "FLEET")
		return 2
	}
	defer follower.Close()
	mux := http.NewServeMux()
	mux.HandleFunc(*path, rpc)
	// The gate goes in front of the mux, never behind it: ServeMux cleans a path (and
	// redirects) before it matches, so behind it the gate would judge another path than
	// the one the client sent.
	var handler http.Handler = mux
	if !*unguarded {
		g, err := gate.New(gate.Options{Checker: follower.Verifier(), Fence: follower})
		if err != nil {
			log.Error(err.Error(), "code", "GATE")
			return 2
		}
		handler = g.Wrap(mux)
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(*host, fmt.Sprint(*port)))
	if err != nil {
		log.Error("cannot listen: "+err.Error(), "code", "LISTEN")
		return 2
	}
	server := &http.Server{Handler: handler, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		server.Shutdown(shutdown)
	}()
	log.Info("listening", "port", listener.Addr().(*net.TCPAddr).Port, "path", *path, "guarded", !*unguarded)
	if err := server.Serve(listener); err != http.ErrServerClosed {
		log.Error("serving failed: "+err.Error(), "code", "SERVE")
		return 1
	}
	return 0
}

type access struct {
	tls      *tls.Config
	password string
}

// etcdAccess reads what the etcd flags name, as api-auth's do: TLS only with https://
// URLs, a certificate with its key, a user with its password file, whose line ending is
// trimmed and whose text never reaches the command line or a log.
func etcdAccess(urls, caFile, certFile, keyFile, user, passwordFile string) (access, error) {
	var a access
	https := strings.HasPrefix(urls, "https://")
	if (caFile != "" || certFile != "") && !https {
		return a, fmt.Errorf("--cluster-etcd-ca and --cluster-etcd-cert need https:// URLs in --cluster-etcd, else the connection is not protected")
	}
	if (certFile == "") != (keyFile == "") {
		return a, fmt.Errorf("--cluster-etcd-cert and --cluster-etcd-key go together")
	}
	if (user == "") != (passwordFile == "") {
		return a, fmt.Errorf("--cluster-etcd-user and --cluster-etcd-password-file go together")
	}
	if https {
		a.tls = &tls.Config{MinVersion: tls.VersionTLS12}
		if caFile != "" {
			pem, err := os.ReadFile(caFile)
			a.tls.RootCAs = x509.NewCertPool()
			if err != nil || !a.tls.RootCAs.AppendCertsFromPEM(pem) {
				return a, fmt.Errorf("--cluster-etcd-ca %s: not a readable PEM bundle of certificates", caFile)
			}
		}
		if certFile != "" {
			pair, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return a, fmt.Errorf("--cluster-etcd-cert %s and --cluster-etcd-key %s: %v", certFile, keyFile, err)
			}
			a.tls.Certificates = []tls.Certificate{pair}
		}
	}
	if passwordFile != "" {
		text, err := os.ReadFile(passwordFile)
		if err != nil {
			return a, fmt.Errorf("--cluster-etcd-password-file %s cannot be read: %v", passwordFile, err)
		}
		a.password = strings.TrimRight(string(text), "\r\n")
		if a.password == "" {
			return a, fmt.Errorf("--cluster-etcd-password-file %s is empty", passwordFile)
		}
	}
	return a, nil
}

// rpc is the node's endpoint in miniature: each call is answered with its own method as
// the result, so a test sees which calls came through.
func rpc(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	type call struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	answer := func(c call) map[string]any {
		return map[string]any{"jsonrpc": "2.0", "result": c.Method, "id": c.ID}
	}
	w.Header().Set("Content-Type", "application/json")
	var batch []call
	if json.Unmarshal(body, &batch) == nil {
		out := make([]map[string]any, len(batch))
		for i, c := range batch {
			out[i] = answer(c)
		}
		json.NewEncoder(w).Encode(out)
		return
	}
	var one call
	if err := json.Unmarshal(body, &one); err != nil {
		one.Method = ""
	}
	json.NewEncoder(w).Encode(answer(one))
}
