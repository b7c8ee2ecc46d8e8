// Package fleet joins an api-auth fleet on etcd (docs/guides/fleet.md, "Running a fleet") as a member
// that verifies and never writes state: it loads the token key, grants, generation, serial
// blocks and revocations into a core of its own, follows the fleet's watch, holds a lease,
// and acknowledges every change as a gateway does, so that a change that answered success
// on any gateway is already in force here. It serves only while its lease is surely alive
// on etcd's side (the fence), and rejoins by itself.
package fleet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"api-auth/go/core"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Options configure a Follower.
type Options struct {
	// Endpoints are etcd's client URLs (api-auth's --cluster-etcd).
	Endpoints []string
	// Name is the fleet's name, its key prefix (--cluster-name; default "api-auth").
	Name string
	// Lease is this member's lease time (--cluster-lease: 2 s to 300 s, whole seconds; default 10 s).
	Lease time.Duration
	// Readers is how many goroutines may verify at once (default 8).
	Readers int
	// WindowLog2 sizes the core's revocation window; the fleet's gateways use 22 (the default).
	WindowLog2 uint32
	Engine     core.Engine
	// Clock is the time (default time.Now).
	Clock func() time.Time
	// Log gets the follower's events (default: slog's default logger).
	Log *slog.Logger
	// TLS, for https:// endpoints: the CAs that may sign etcd's certificate (nil RootCAs:
	// the system's) and a client certificate, as api-auth's --cluster-etcd-ca, -cert, -key.
	TLS *tls.Config
	// Username and Password sign in as an etcd user (RBAC), as --cluster-etcd-user and
	// --cluster-etcd-password-file: readwrite on /<Name>/ is all a follower needs.
	Username, Password string
}

// Error is a follower's error with a stable code.
type Error struct{ Code, Message string }

func (e *Error) Error() string { return "api-auth fleet: " + e.Message + " (" + e.Code + ")" }

// Follower is a member of a fleet that holds its state in a core and verifies with it.
type Follower struct {
	opts    Options
	prefix  string
	lease   time.Duration
	margin  time.Duration
	shared  *core.Shared
	owner   *core.Core
	client  *clientv3.Client
	log     *slog.Logger
	cancel  context.CancelFunc
	done    chan struct{}
	ready   chan error
	readyMu sync.Once

	// The fence: serving while caught up and before deadline (Unix ns), the time until
	// which the lease is surely alive on etcd's side.
	caught   atomic.Bool
	deadline atomic.Int64
	fatal    atomic.Bool

	// Owned by the run goroutine.
	key        string
	generation uint32
	hasGen     bool
	fresh      bool
	served     bool
	// limitShare is the G last handed to the core (0 before the first).
	limitShare uint32
}

// Join connects to the fleet and returns once this node holds the whole state and serves,
// or with the reason it cannot (ctx bounds the wait). It then follows the fleet until Close.
func Join(ctx context.Context, opts Options) (*Follower, error) {
	if len(opts.Endpoints) == 0 {
		return nil, &Error{"FLEET_NO_ENDPOINTS", "Options.Endpoints names no etcd (api-auth's --cluster-etcd URLs)"}
	}
	if opts.Name == "" {
		opts.Name = "api-auth"
	}
	if strings.ContainsAny(opts.Name, "/") {
		return nil, &Error{"FLEET_BAD_NAME", "Options.Name must not hold \"/\": it is the fleet's key prefix /<name>/"}
	}
	if opts.Lease == 0 {
		opts.Lease = 10 * time.Second
	}
	if opts.Lease < 2*time.Second || opts.Lease > 300*time.Second || opts.Lease%time.Second != 0 {
		return nil, &Error{"FLEET_BAD_LEASE", "Options.Lease must be whole seconds from 2 s to 300 s, as --cluster-lease"}
	}
	https := strings.HasPrefix(opts.Endpoints[0], "https://")
	for _, e := range opts.Endpoints {
		if strings.HasPrefix(e, "https://") != https || !(https || strings.HasPrefix(e, "http://")) {
			return nil, &Error{"FLEET_BAD_ENDPOINTS", "Options.Endpoints must be all http:// or all https:// URLs, not " + strings.Join(opts.Endpoints, ",")}
		}
	}
	if opts.TLS != nil && !https {
		return nil, &Error{"FLEET_TLS_WITHOUT_HTTPS", "Options.TLS is set but the endpoints are http://: the connection would not be protected; use https:// URLs"}
	}
	if https && opts.TLS == nil {
		opts.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if (opts.Username == "") != (opts.Password == "") {
		return nil, &Error{"FLEET_HALF_A_USER", "Options.Username and Options.Password go together"}
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	shared, err := core.NewShared(ctx, core.SharedOptions{WindowLog2: opts.WindowLog2, Readers: opts.Readers, Engine: opts.Engine})
	if err != nil {
		return nil, err
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: opts.Endpoints, DialTimeout: opts.Lease, Logger: zap.NewNop(),
		TLS: opts.TLS, Username: opts.Username, Password: opts.Password})
	if err != nil {
		shared.Close(ctx)
		return nil, &Error{"FLEET_ETCD", "cannot use etcd at " + strings.Join(opts.Endpoints, ",") + ": " + err.Error()}
	}
	// etcd expires a lease TTL after it received the last renewal, which is after it was
	// sent, when this side starts counting: serve only until TTL minus this margin.
	margin := opts.Lease / 10
	if margin < 500*time.Millisecond {
		margin = 500 * time.Millisecond
	}
	run, cancel := context.WithCancel(context.Background())
	f := &Follower{opts: opts, prefix: "/" + opts.Name + "/", lease: opts.Lease, margin: margin, shared: shared,
		owner: shared.Owner(), client: client, log: opts.Log.With("cluster", opts.Name), cancel: cancel,
		done: make(chan struct{}), ready: make(chan error, 1), fresh: true}
	go f.run(run)
	select {
	case err = <-f.ready:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Verifier checks tokens against the fleet's state, on any goroutine.
func (f *Follower) Verifier() *core.Verifier { return f.shared.Verifier() }

// Serving tells whether the node holds the fleet's state and its lease is surely alive at
// now: protected requests get 503 otherwise. It allocates nothing.
func (f *Follower) Serving(now time.Time) bool {
	return f.caught.Load() && now.UnixNano() < f.deadline.Load()
}

// Close leaves the fleet: it gives its lease back, so that writers stop waiting for it at once.
func (f *Follower) Close() error {
	f.cancel()
	<-f.done
	f.client.Close()
	return f.shared.Close(context.Background())
}

func (f *Follower) joined(err error) {
	f.readyMu.Do(func() { f.ready <- err })
}

func (f *Follower) run(ctx context.Context) {
	defer close(f.done)
	for attempt := 0; ctx.Err() == nil; attempt++ {
		err := f.session(ctx)
		f.caught.Store(false)
		if ctx.Err() != nil || f.fatal.Load() {
			f.joined(err)
			return
		}
		if !f.served {
			// A first join that fails says why at once, as a gateway's start does.
			f.joined(err)
			return
		}
		f.log.Warn("lost touch with the fleet; protected requests get 503 until it has caught up again", "error", err.Error())
		wait := time.Duration(attempt+1) * 200 * time.Millisecond
		if wait > 2*time.Second {
			wait = 2 * time.Second
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// session is one lease: the whole state read, the member key, and the watch until the
// lease is lost or the watch ends.
func (f *Follower) session(parent context.Context) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	ttl := int64(f.lease / time.Second)
	sent := f.opts.Clock()
	grant, err := f.unary(ctx, func(c context.Context) (any, error) { return f.client.Grant(c, ttl) })
	if err != nil {
		return err
	}
	leaseID := grant.(*clientv3.LeaseGrantResponse).ID
	defer func() {
		// The fence closes first: once the lease is revoked, the member key is gone and a
		// writer's barrier stops waiting for this node, which must not serve by then.
		f.caught.Store(false)
		// Given back at once, so that no writer waits for a member that has left.
		c, done := context.WithTimeout(context.Background(), time.Second)
		f.client.Revoke(c, leaseID)
		done()
	}()
	f.deadline.Store(sent.Add(f.lease - f.margin).UnixNano())
	lost := make(chan error, 1)
	go f.renew(ctx, leaseID, lost)

	got, err := f.unary(ctx, func(c context.Context) (any, error) { return f.client.Get(c, f.prefix, clientv3.WithPrefix()) })
	if err != nil {
		return err
	}
	snapshot := got.(*clientv3.GetResponse)
	revision := snapshot.Header.Revision
	kvs := make(map[string][]byte, len(snapshot.Kvs))
	for _, kv := range snapshot.Kvs {
		kvs[strings.TrimPrefix(string(kv.Key), f.prefix)] = kv.Value
	}
	if err := f.load(kvs); err != nil {
		return err
	}
	f.fresh = false
	// The members that enforce a share of each token's limits, this node among them: G,
	// which the gateways count too (host/cluster/membership.ts), handed to the core.
	own := strconv.FormatInt(int64(leaseID), 16)
	sharing := map[string]bool{own: true}
	for _, kv := range snapshot.Kvs {
		f.member(sharing, strings.TrimPrefix(string(kv.Key), f.prefix), kv)
	}
	if err := f.share(sharing); err != nil {
		return err
	}
	watch := f.client.Watch(clientv3.WithRequireLeader(ctx), f.prefix, clientv3.WithPrefix(), clientv3.WithRev(revision+1))
	memberKey := f.prefix + MemberName(int64(leaseID))
	put, err := f.unary(ctx, func(c context.Context) (any, error) {
		return f.client.Put(c, memberKey, string(MemberValue(revision)), clientv3.WithLease(leaseID))
	})
	if err != nil {
		return err
	}
	// A writer whose barrier ended before this key existed may have written after the
	// snapshot: serve only once the watch has passed the key's own revision.
	joinedAt := put.(*clientv3.PutResponse).Header.Revision
	applied, published := revision, revision
	publishing := make(chan int64, 1)
	var inFlight bool
	publish := func() {
		if inFlight || applied <= published {
			return
		}
		inFlight = true
		go func(rev int64) {
			c, done := context.WithTimeout(ctx, f.lease)
			_, err := f.client.Put(c, memberKey, string(MemberValue(rev)), clientv3.WithLease(leaseID))
			done()
			if err != nil {
				rev = -1
			}
			publishing <- rev
		}(applied)
	}
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	for {
		select {
		case err := <-lost:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case rev := <-publishing:
			inFlight = false
			if rev > published {
				published = rev
			}
			publish()
		case <-sweep.C:
			if err := f.owner.Sweep(f.opts.Clock().Unix()); err != nil {
				return err
			}
		case res, ok := <-watch:
			if !ok {
				return &Error{"FLEET_WATCH", "the fleet watch ended"}
			}
			if err := res.Err(); err != nil {
				return &Error{"FLEET_WATCH", "etcd cancelled the fleet watch (" + err.Error() + "); reading the whole state again"}
			}
			state := false
			for _, ev := range res.Events {
				name := strings.TrimPrefix(string(ev.Kv.Key), f.prefix)
				if strings.HasPrefix(name, "members/") {
					if ev.Type == clientv3.EventTypeDelete {
						if lease := name[len("members/"):]; lease != own {
							delete(sharing, lease)
						}
					} else {
						f.member(sharing, name, ev.Kv)
					}
					if err := f.share(sharing); err != nil {
						return err
					}
					continue
				}
				state = true
				if err := f.apply(name, ev); err != nil {
					return err
				}
				if ev.Kv.ModRevision > applied {
					applied = ev.Kv.ModRevision
				}
			}
			if state {
				publish()
			}
			if !f.caught.Load() && res.Header.Revision >= joinedAt {
				f.caught.Store(true)
				f.served = true
				f.joined(nil)
				f.log.Info("serving in the fleet", "revision", res.Header.Revision)
			}
		}
	}
}

// member notes one member key of the fleet in `sharing` (lease -> enforces its share):
// only a key bound to its own lease is a member, as the gateways count them; another key
// is left out (a gateway warns of it).
func (f *Follower) member(sharing map[string]bool, name string, kv *mvccpb.KeyValue) {
	if !strings.HasPrefix(name, "members/") || kv.Lease == 0 || strconv.FormatInt(kv.Lease, 16) != name[len("members/"):] {
		return
	}
	c, err := Decode(name, kv.Value)
	if err != nil || c.Member == nil {
		return
	}
	if c.Member.SharesLimits() {
		sharing[c.Member.Lease] = true
	} else {
		delete(sharing, c.Member.Lease)
	}
}

// share hands the core G, the members that enforce a share of each token's limits, when
// it changed: each then lets through rate / G and burst / G (rounded up).
func (f *Follower) share(sharing map[string]bool) error {
	g := uint32(len(sharing))
	if g == f.limitShare {
		return nil
	}
	if err := f.owner.SetLimitShare(g); err != nil {
		return &Error{"FLEET_CORE", "cannot set the limit share: " + err.Error()}
	}
	f.limitShare = g
	f.log.Debug("limit share", "members", g)
	return nil
}

// unary is one etcd call, bounded by the lease time: an answer later than that is no
// use to a node that must stop serving by then.
func (f *Follower) unary(ctx context.Context, call func(context.Context) (any, error)) (any, error) {
	c, done := context.WithTimeout(ctx, f.lease)
	defer done()
	r, err := call(c)
	if err != nil {
		return nil, &Error{"FLEET_ETCD", "etcd did not answer: " + err.Error()}
	}
	return r, nil
}

// renew keeps the lease alive every quarter of its time; each success moves the deadline
// from the time the renewal was sent.
func (f *Follower) renew(ctx context.Context, id clientv3.LeaseID, lost chan<- error) {
	tick := time.NewTicker(f.lease / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sent := f.opts.Clock()
		c, done := context.WithTimeout(ctx, f.lease)
		_, err := f.client.KeepAliveOnce(c, id)
		done()
		switch {
		case err == nil:
			f.deadline.Store(sent.Add(f.lease - f.margin).UnixNano())
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			lost <- &Error{"FLEET_LEASE_LOST", "the fleet lease expired (this node was stopped or cut off for longer than the lease)"}
			return
		case ctx.Err() == nil:
			f.log.Warn("cannot renew the fleet lease; protected requests get 503 once it runs out", "error", err.Error())
		}
	}
}

// load applies a snapshot, adding to what the core holds: grants, blocks and revocations
// only ever add, and the generation only grows.
func (f *Follower) load(kvs map[string][]byte) error {
	s, err := DecodeState(kvs)
	if err != nil {
		return &Error{"FLEET_STATE", err.Error()}
	}
	now := f.opts.Clock().Unix()
	if err := f.applyKey(s.Key); err != nil {
		return err
	}
	if err := f.applyGeneration(s.Generation); err != nil {
		return err
	}
	for _, g := range s.Grants {
		if err := f.applyGrant(g); err != nil {
			return err
		}
	}
	var live []Block
	for _, b := range s.Blocks {
		if b.Bound > uint64(now) {
			live = append(live, b)
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i].Start < live[j].Start })
	if f.fresh {
		// A fresh core: its range starts at the lowest live block, or the next one to come.
		base := s.Serials
		if len(live) > 0 {
			base = live[0].Start
		}
		if err := f.owner.RestoreSerials(base, base, 0); err != nil {
			return err
		}
	}
	for _, b := range live {
		if err := f.applyBlock(b); err != nil {
			return err
		}
	}
	for _, r := range s.Revoked {
		if err := f.applyRevoked(r, now); err != nil {
			return err
		}
	}
	return nil
}

func (f *Follower) apply(name string, ev *clientv3.Event) error {
	if ev.Type == clientv3.EventTypeDelete {
		if name == "key" {
			return f.stop("the fleet's token key was deleted (the fleet was reset); restart this node to join it anew")
		}
		// Expired revocations, blocks and entries go by tidy; the core forgets them by its sweep.
		return nil
	}
	c, err := Decode(name, ev.Kv.Value)
	if err != nil && !Verifies(name) {
		f.log.Warn("skipped a damaged key that verification does not need: " + err.Error())
		return nil
	}
	if err != nil {
		// This node cannot know the state it holds: the session ends (the fence closes
		// first), and every new one reads the whole state, which fails until the key is
		// repaired or deleted, as after an etcd outage.
		why := "cannot apply the fleet's change: " + err.Error() + "; protected requests get 503 until the key is repaired or deleted"
		f.log.Error(why)
		return &Error{"FLEET_DAMAGED", why}
	}
	switch {
	case c.Key != nil:
		return f.applyKey(c.Key)
	case c.Generation != nil:
		return f.applyGeneration(*c.Generation)
	case c.Grant != nil:
		return f.applyGrant(*c.Grant)
	case c.Block != nil:
		return f.applyBlock(*c.Block)
	case c.Revoked != nil:
		return f.applyRevoked(*c.Revoked, f.opts.Clock().Unix())
	}
	return nil
}

// stop ends this node's service for good: only a restart may take a fleet that was reset.
func (f *Follower) stop(why string) error {
	f.fatal.Store(true)
	f.caught.Store(false)
	f.log.Error(why)
	return &Error{"FLEET_FATAL", why}
}

func (f *Follower) applyKey(key []byte) error {
	text := string(key)
	if f.key == text {
		return nil
	}
	if f.key != "" {
		return f.stop("the fleet's token key changed under this node (the fleet was reset); restart it to join it anew")
	}
	if err := f.owner.SetKey(key); err != nil {
		return err
	}
	f.key = text
	return nil
}

func (f *Follower) applyGeneration(g uint32) error {
	if f.hasGen && g <= f.generation {
		return nil
	}
	f.generation, f.hasGen = g, true
	return f.owner.SetGeneration(g)
}

func (f *Follower) applyGrant(g Grant) error {
	count, err := f.owner.GrantCount()
	if err != nil || g.ID < count {
		return err
	}
	if g.ID > count {
		return f.stop(fmt.Sprintf("grant %d arrived before grant %d; restart this node", g.ID, count))
	}
	id, err := f.owner.AddGrant(g.Entries)
	if err != nil {
		return f.stop(fmt.Sprintf("the fleet's grant %d is one the core refuses: %v", g.ID, err))
	}
	if id != g.ID {
		return f.stop(fmt.Sprintf("the fleet's grant %d repeats grant %d", g.ID, id))
	}
	return nil
}

func (f *Follower) applyBlock(b Block) error {
	// Pages whose tokens have all expired make room in the window first.
	if err := f.owner.Sweep(f.opts.Clock().Unix()); err != nil {
		return err
	}
	_, err := f.owner.ReserveSerials(b.Start, b.End, b.Bound)
	return err
}

func (f *Follower) applyRevoked(r Revoked, now int64) error {
	if r.Expiry <= uint64(now) {
		return nil
	}
	if _, err := f.owner.RevokeSerial(r.Serial); err != nil {
		return f.stop(fmt.Sprintf("revoked serial %d lies in no block this node holds", r.Serial))
	}
	return nil
}
