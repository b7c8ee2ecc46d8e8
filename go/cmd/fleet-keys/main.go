// Command fleet-keys decodes a snapshot of an api-auth fleet's keys, as go/fleet reads
// them, and prints the state a Go node would hold: how test/fleet/go.test.ts checks that what the
// TypeScript gateways write is what the Go side reads (docs/fleet-keys.md).
//
//	fleet-keys < snapshot.json    # {"key": "...", "grants/0000000000": "[...]", ...}, names without the prefix
package main

import (
	"encoding/base64"
	"encoding/json"
	"os"

	"api-auth/go/fleet"
)

func main() {
	var kvs map[string]string
	out := json.NewEncoder(os.Stdout)
	if err := json.NewDecoder(os.Stdin).Decode(&kvs); err != nil {
		out.Encode(map[string]string{"error": "the snapshot is not a JSON object of strings: " + err.Error()})
		os.Exit(2)
	}
	raw := make(map[string][]byte, len(kvs))
	for k, v := range kvs {
		raw[k] = []byte(v)
	}
	s, err := fleet.DecodeState(raw)
	if err != nil {
		out.Encode(map[string]string{"error": err.Error()})
		os.Exit(1)
	}
	out.Encode(map[string]any{
		"key": base64.StdEncoding.EncodeToString(s.Key), "generation": s.Generation, "serials": s.Serials,
		"grants": s.Grants, "blocks": s.Blocks, "revoked": s.Revoked, "members": s.Members,
	})
}
