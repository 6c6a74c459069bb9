package syncer

import "testing"

func TestReadableKey(t *testing.T) {
	names := []string{"company", "customer"}
	for _, c := range []struct {
		names     []string
		key, want string
	}{
		{names, "1000\x1fC0001", "company=1000,customer=C0001"},
		{[]string{"erp_id"}, "M0000001", "M0000001"},
		{nil, "1000\x1fC0001", "1000,C0001"},
		{names, "a,b\x1f", "company=a,b,customer="},
	} {
		if got := readableKey(c.names, c.key); got != c.want {
			t.Errorf("readableKey(%v, %q) = %q, want %q", c.names, c.key, got, c.want)
		}
	}
}
