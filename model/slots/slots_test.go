package slots

import "testing"

// R-CRD-1 vectors.
func TestOfMatchesJavaHashCode(t *testing.T) {
	for id, want := range map[string]int{
		"txn-a": 8, "my-txn": 45, "t": 16, "polygenelubricants": 0, "😀": 49, "g": 3,
	} {
		if got := Of(id); got != want {
			t.Errorf("Of(%q) = %d, want %d", id, got, want)
		}
	}
}
