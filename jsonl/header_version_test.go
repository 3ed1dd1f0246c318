package jsonl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// TestHeaderVersionMustBeANumber: a header whose version is a string, null
// or an object is not a session header in either generation file; only a
// JSON number names a format version.
func TestHeaderVersionMustBeANumber(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	for _, c := range []struct{ id, file, version string }{
		{"string-in-v3", "session.v3.jsonl", `"3"`},
		{"null-in-v3", "session.v3.jsonl", `null`},
		{"null-in-v0", "session.jsonl", `null`},
		{"string-in-v0", "session.jsonl", `"0"`},
		{"object-in-v3", "session.v3.jsonl", `{"v":3}`},
	} {
		line := `{"type":"session","version":` + c.version + `,"id":"` + c.id + `","createdAt":5,"isSeeded":false,"delegationDepth":0}`
		writeLogFile(t, e.root, c.id, c.file, line+"\n"+turn0)
		_, err := e.store.Open(bg, c.id, jsonl.AccessRead, jsonl.OpenOptions{})
		require.ErrorIs(t, err, wire.ErrCorrupt, c.id)
		require.ErrorContains(t, err, "corrupt session log: first line is not a session header", c.id)
	}
}
