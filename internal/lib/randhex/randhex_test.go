package randhex

import (
	"encoding/hex"
	"testing"
)

func TestStringIsHexOfNBytesAndVaries(t *testing.T) {
	for _, n := range []int{0, 4, 16} {
		s := String(n)
		if len(s) != 2*n {
			t.Fatalf("String(%d) = %q: want %d characters", n, s, 2*n)
		}
		if _, err := hex.DecodeString(s); err != nil {
			t.Fatalf("String(%d) = %q: not hex: %v", n, s, err)
		}
	}
	if a, b := String(16), String(16); a == b {
		t.Fatalf("two calls returned the same 16 bytes %q", a)
	}
}
