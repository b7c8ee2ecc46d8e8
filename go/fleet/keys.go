package fleet

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The fleet's key space under /<cluster-name>/, as docs/fleet-keys.md specifies it and
// host/cluster/fleet.ts writes it. Only what a verifier needs is decoded; the rest
// (tokens/, the password's record, the throttle) is the gateways' business.

// Change is one key of the fleet's state, decoded: exactly one of its fields is set.
type Change struct {
	Key        []byte   // key: the token key
	Generation *uint32  // password: the password generation
	Serials    *uint64  // serials: the start of the next block
	Grant      *Grant   // grants/<id>
	Block      *Block   // blocks/<start>
	Revoked    *Revoked // revoked/<serial>
	Member     *Member  // members/<lease>
	// Ignored is a key a verifier does not use (tokens/<serial>).
	Ignored bool
}

// Grant is a grant's id and its entry list as the core takes it: endpoints, then for a
// method scope "" and the patterns.
type Grant struct {
	ID      uint32   `json:"id"`
	Entries []string `json:"entries"`
}

// Block is a block of serials [Start, End) one gateway issues from; its tokens expire by Bound.
type Block struct {
	Start uint64 `json:"start"`
	End   uint64 `json:"end"`
	Bound uint64 `json:"bound"`
}

// Revoked is a revoked token's serial and its expiry (Unix seconds).
type Revoked struct {
	Serial uint64 `json:"serial"`
	Expiry uint64 `json:"expiry"`
}

// Member is a live member's key (members/<lease id, hex>), the highest revision of a
// state change it holds, whether it is a follower (it never writes), and whether, as a
// follower, it enforces its share of each token's limits (rate / G, burst / G), so that
// the gateways count it in G.
type Member struct {
	Lease      string `json:"lease"`
	Applied    int64  `json:"applied"`
	Follower   bool   `json:"follower"`
	LimitShare bool   `json:"limitShare"`
}

// SharesLimits is whether the member enforces its share of each token's limits: every
// gateway, and a follower that says so; G is the number of such members.
func (m Member) SharesLimits() bool { return !m.Follower || m.LimitShare }

// Widths of the zero-padded numbers in keys, so that etcd's key order is their order.
const (
	serialWidth = 16
	grantWidth  = 10
)

func number(text string, width int, what string) (uint64, error) {
	if width > 0 && len(text) != width {
		return 0, fmt.Errorf("%s %q is not %d digits", what, text, width)
	}
	n, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a decimal number", what, text)
	}
	return n, nil
}

// Decode reads one key (without the prefix) and its value.
func Decode(name string, value []byte) (Change, error) {
	var c Change
	var err error
	switch {
	case name == "key":
		c.Key, err = base64.StdEncoding.DecodeString(string(value))
		if err == nil && len(c.Key) != 32 {
			err = fmt.Errorf("the token key is %d bytes, not 32", len(c.Key))
		}
	case name == "password":
		var v struct {
			Record     *string  `json:"record"`
			Generation *float64 `json:"generation"`
		}
		if err = json.Unmarshal(value, &v); err == nil && (v.Generation == nil || *v.Generation < 0 || *v.Generation != float64(uint32(*v.Generation))) {
			err = fmt.Errorf("the password holds no generation (0 to 2^32-1)")
		}
		if err == nil {
			g := uint32(*v.Generation)
			c.Generation = &g
		}
	case name == "serials":
		var n uint64
		n, err = number(string(value), 0, "serials")
		c.Serials = &n
	case strings.HasPrefix(name, "grants/"):
		var id uint64
		if id, err = number(name[7:], grantWidth, "grant id"); err == nil {
			g := &Grant{ID: uint32(id)}
			if err = json.Unmarshal(value, &g.Entries); err == nil && len(g.Entries) == 0 {
				err = fmt.Errorf("grant %d has no entries", id)
			}
			c.Grant = g
		}
	case strings.HasPrefix(name, "blocks/"):
		var start uint64
		if start, err = number(name[7:], serialWidth, "block start"); err == nil {
			var v struct{ End, Bound *uint64 }
			if err = json.Unmarshal(value, &v); err == nil && (v.End == nil || v.Bound == nil || *v.End <= start) {
				err = fmt.Errorf("block %d has no end past its start, or no bound", start)
			}
			if err == nil {
				c.Block = &Block{start, *v.End, *v.Bound}
			}
		}
	case strings.HasPrefix(name, "revoked/"):
		var serial, expiry uint64
		if serial, err = number(name[8:], serialWidth, "revoked serial"); err == nil {
			expiry, err = number(string(value), 0, "revocation expiry")
			c.Revoked = &Revoked{serial, expiry}
		}
	case strings.HasPrefix(name, "members/"):
		var v struct {
			Applied    *int64
			Follower   bool
			LimitShare bool `json:"limitShare"`
		}
		if err = json.Unmarshal(value, &v); err == nil && v.Applied == nil {
			err = fmt.Errorf("member %s publishes no applied revision", name[8:])
		}
		if err == nil {
			c.Member = &Member{name[8:], *v.Applied, v.Follower, v.LimitShare}
		}
	case strings.HasPrefix(name, "tokens/"):
		c.Ignored = true
	default:
		err = fmt.Errorf("unknown key")
	}
	if err != nil {
		return Change{}, fmt.Errorf("the fleet's key %q: %w", name, err)
	}
	return c, nil
}

// MemberValue is the value of this node's member key: the highest revision of a state
// change it has applied, which the writers' barrier waits for, and that it is a follower,
// which never writes and so never tidies the fleet's expired keys.
func MemberValue(applied int64) []byte {
	return append(strconv.AppendInt([]byte(`{"applied":`), applied, 10), `,"follower":true,"limitShare":true}`...)
}

// MemberName is the key (without the prefix) of the member holding lease id.
func MemberName(lease int64) string {
	return "members/" + strconv.FormatInt(lease, 16)
}

// State is the whole fleet state a verifier needs, decoded from a snapshot of the prefix.
type State struct {
	Key        []byte
	Generation uint32
	Serials    uint64
	Grants     []Grant   // by id
	Blocks     []Block   // by start
	Revoked    []Revoked // by serial
	Members    []Member
}

// Verifies tells whether a verifier needs the key name (without the prefix): the token
// key, the password, the serial counter, grants, blocks and revocations; not the
// inventory (tokens/), the member keys, nor a key no version of api-auth writes. A
// damaged key it needs fences the node until the key is repaired or deleted; a damaged
// one it does not need is skipped, as the gateways skip it (host/cluster/keys.ts,
// verifiesWith).
func Verifies(name string) bool {
	switch {
	case name == "key", name == "password", name == "serials":
		return true
	case strings.HasPrefix(name, "grants/"), strings.HasPrefix(name, "blocks/"), strings.HasPrefix(name, "revoked/"):
		return true
	}
	return false
}

// DecodeState decodes a snapshot: keys without the prefix, and their values. A damaged
// key that verification does not need is left out.
func DecodeState(kvs map[string][]byte) (State, error) {
	var s State
	for name, value := range kvs {
		c, err := Decode(name, value)
		if err != nil && !Verifies(name) {
			continue
		}
		if err != nil {
			return State{}, err
		}
		switch {
		case c.Key != nil:
			s.Key = c.Key
		case c.Generation != nil:
			s.Generation = *c.Generation
		case c.Serials != nil:
			s.Serials = *c.Serials
		case c.Grant != nil:
			s.Grants = append(s.Grants, *c.Grant)
		case c.Block != nil:
			s.Blocks = append(s.Blocks, *c.Block)
		case c.Revoked != nil:
			s.Revoked = append(s.Revoked, *c.Revoked)
		case c.Member != nil:
			s.Members = append(s.Members, *c.Member)
		}
	}
	if s.Key == nil {
		return State{}, fmt.Errorf("the fleet holds no token key: no api-auth gateway has seeded it")
	}
	sort.Slice(s.Grants, func(i, j int) bool { return s.Grants[i].ID < s.Grants[j].ID })
	for i, g := range s.Grants {
		if g.ID != uint32(i) {
			return State{}, fmt.Errorf("the fleet's grants skip id %d", i)
		}
	}
	sort.Slice(s.Blocks, func(i, j int) bool { return s.Blocks[i].Start < s.Blocks[j].Start })
	sort.Slice(s.Revoked, func(i, j int) bool { return s.Revoked[i].Serial < s.Revoked[j].Serial })
	sort.Slice(s.Members, func(i, j int) bool { return s.Members[i].Lease < s.Members[j].Lease })
	return s, nil
}
