package core

import (
	"context"
	"testing"
)

// A check's record in the core's result buffer stays as the check left it through the
// calls a host makes next for its token (admit, refused or not, and usage): each call
// has fields of its own (result_record.go), so a host that reads the check's record late
// reads the check's values, never a wait or a count.
func TestACheckRecordOutlivesAdmitAndUsage(t *testing.T) {
	ctx := context.Background()
	const now = int64(1_700_000_000)
	c, err := New(ctx, Options{WindowLog2: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.SetKey(make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	client := [16]byte{10: 0xff, 11: 0xff, 12: 192, 15: 7}
	for _, tc := range []struct {
		name    string
		entries []string
		refused AdmitResult
	}{
		{"past the rate", []string{"/ext/bc/C/rpc", "", "", "rate 1/h", "burst 1"}, RateLimited},
		{"past the quota", []string{"/ext/bc/C/rpc", "", "eth_*", "", "quota 1/day"}, QuotaSpent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			grant, err := c.AddGrant(tc.entries)
			if err != nil {
				t.Fatal(err)
			}
			token, claims, err := c.Issue(grant, now, 3600)
			if err != nil {
				t.Fatal(err)
			}
			checked, err := c.Authorize("Bearer "+token, "/ext/bc/C/rpc", now)
			if err != nil {
				t.Fatal(err)
			}
			want := Result{Outcome: Limited, Grant: grant, Serial: claims.Serial, Expiry: claims.Expiry, Scoped: tc.refused == QuotaSpent}
			if checked != want {
				t.Fatalf("the check: %+v, not %+v", checked, want)
			}
			for i, result := range []AdmitResult{Admitted, tc.refused} {
				a, err := c.Admit(checked.Serial, checked.Expiry, checked.Grant, 1, client, now*1e9)
				if err != nil || a.Result != result || (result != Admitted) != (a.WaitNs != 0) {
					t.Fatalf("admit %d: %+v, %v; want %v with a wait when refused", i, a, err, result)
				}
			}
			if u, found, err := c.Usage(checked.Serial); err != nil || !found || u.Requests != 1 {
				t.Fatalf("usage: %+v, %v, %v", u, found, err)
			}
			in := c.in
			late := Result{
				Outcome: checked.Outcome,
				Grant:   in.u32(in.result + resultGrant),
				Serial:  in.u64(in.result + resultSerial),
				Expiry:  in.u64(in.result + resultExpiry),
				Scoped:  in.u32(in.result+resultScoped) == 1,
			}
			if late != checked {
				t.Errorf("after admit and usage the record reads %+v, the check returned %+v", late, checked)
			}
		})
	}
}
