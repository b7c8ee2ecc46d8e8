package fleet

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// testdata/fleet-keys.json is what a real api-auth gateway fleet wrote (captured by
// test/fleet/go.test.ts, which also checks that the gateways still write keys of its shape):
// one gateway and one Go node, four grants, 16 revocations, one password change.
func fixture(t *testing.T) map[string][]byte {
	t.Helper()
	data, err := os.ReadFile("testdata/fleet-keys.json")
	if err != nil {
		t.Fatal(err)
	}
	var kvs map[string]string
	if err := json.Unmarshal(data, &kvs); err != nil {
		t.Fatal(err)
	}
	raw := map[string][]byte{}
	for k, v := range kvs {
		raw[k] = []byte(v)
	}
	return raw
}

func TestTheGatewaysKeysDecodeToTheirState(t *testing.T) {
	s, err := DecodeState(fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Key) != 32 || s.Generation != 1 || s.Serials != 4096 {
		t.Errorf("key of %d bytes, generation %d, serials %d", len(s.Key), s.Generation, s.Serials)
	}
	var grants [][]string
	for _, g := range s.Grants {
		grants = append(grants, g.Entries)
	}
	want := [][]string{{"/ext/info"}, {"/ext/info", "", "info.getNodeID"}, {"/ext/bc/X/rpc"}, {"/ext/metrics"}}
	if !reflect.DeepEqual(grants, want) {
		t.Errorf("grants %q, not %q", grants, want)
	}
	if len(s.Blocks) != 1 || s.Blocks[0].Start != 0 || s.Blocks[0].End != 4096 || s.Blocks[0].Bound == 0 {
		t.Errorf("blocks %+v", s.Blocks)
	}
	// 16 revokes, and the end of a rotation, which a gateway records as a revocation.
	if len(s.Revoked) != 17 {
		t.Errorf("%d revocations, not 17", len(s.Revoked))
	}
	for _, r := range s.Revoked {
		if r.Serial >= 4096 || r.Expiry == 0 {
			t.Errorf("a revocation outside the block, or without expiry: %+v", r)
		}
	}
	if len(s.Members) != 2 || s.Members[0].Follower == s.Members[1].Follower {
		t.Errorf("members %+v: not a gateway and a follower", s.Members)
	}
}

func TestABrokenKeyIsRefusedWithItsName(t *testing.T) {
	for name, value := range map[string]string{
		"key":                      "c2hvcnQ=",
		"password":                 `{"record":"x"}`,
		"grants/12":                `["/ext/info"]`,
		"grants/0000000000":        `[]`,
		"blocks/0000000000000000":  `{"end":0,"bound":1}`,
		"revoked/0000000000000001": "soon",
		"members/1f":               `{}`,
		"elsewhere":                "x",
	} {
		if _, err := Decode(name, []byte(value)); err == nil || !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("%s = %s: %v", name, value, err)
		}
	}
}

// The captured state, put into a fresh etcd, is one a follower joins.
func TestAFollowerJoinsTheCapturedFleet(t *testing.T) {
	e := startEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for k, v := range fixture(t) {
		if strings.HasPrefix(k, "members/") {
			continue
		}
		if _, err := cli.Put(context.Background(), "/api-auth/"+k, string(v)); err != nil {
			t.Fatal(err)
		}
	}
	f := join(t, e, 4*time.Second)
	if !f.Serving(time.Now()) {
		t.Error("not serving")
	}
}
