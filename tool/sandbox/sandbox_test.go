package sandbox

import (
	"errors"
	"testing"
)

func TestModes(t *testing.T) {
	for _, c := range []struct {
		m               Mode
		valid, confined bool
	}{
		{"read-only", true, true}, {"workspace-write", true, true}, {"danger-full-access", true, false}, {"", false, false}, {"full", false, false},
	} {
		if c.m.Valid() != c.valid || c.m.Confined() != c.confined {
			t.Errorf("%q: valid %v confined %v", c.m, c.m.Valid(), c.m.Confined())
		}
	}
}

func TestCheck(t *testing.T) {
	at := func(v int) Sandbox { return Sandbox{ABI: func() int { return v }} }
	for _, m := range []Mode{ReadOnly, WorkspaceWrite} {
		if err := at(6).Check(m); err != nil {
			t.Errorf("ABI 6, %s: %v", m, err)
		}
		for _, v := range []int{0, 1, 5} {
			err := at(v).Check(m)
			var ue *UnavailableError
			if !errors.As(err, &ue) || !errors.Is(err, ErrUnavailable) || ue.Mode != m {
				t.Errorf("ABI %d, %s: %v", v, m, err)
			}
		}
	}
	if err := at(0).Check(DangerFullAccess); err != nil {
		t.Errorf("danger-full-access needs no sandbox: %v", err)
	}
}
