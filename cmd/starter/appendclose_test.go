package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// atEOF is a reader that runs fn once, when r is exhausted.
type atEOF struct {
	r    io.Reader
	fn   func()
	done bool
}

func (e *atEOF) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF && !e.done {
		e.done = true
		e.fn()
	}
	return n, err
}

// A close whose revocation record cannot be written, after every event was
// stored and the lease released, leaves the session complete and free: the
// command succeeds and warns, and says what is stored.
func TestAppendRevocationFailureAfterEverythingIsStored(t *testing.T) {
	sample := string(readFile(t, "../../testdata/sample.jsonl"))
	root := t.TempDir()
	mustOK(t, logCmd(t, root, "none", "", "create", "--id", "demo"))
	// Once stdin is read, the revocation records' directory becomes a file:
	// the close cannot write the record of its handle id. The appends come
	// in batches, so the first one, which opens the lease and checks the
	// handle is not revoked, is stored before that.
	stdin := &atEOF{r: strings.NewReader(sample), fn: func() {
		dir := filepath.Join(root, ".revocations")
		require.NoError(t, os.RemoveAll(dir))
		require.NoError(t, os.WriteFile(dir, nil, 0o644))
	}}
	var out, errb bytes.Buffer
	code := run([]string{"log", "append", "--root", root, "--compression", "none", "--id", "demo", "--batch", "4"}, stdin, &out, &errb)
	n := strings.Count(sample, "\n")
	require.Equal(t, 0, code, "stderr: %s", errb.String())
	require.Equal(t, "appended "+strconv.Itoa(n)+" events to session \"demo\"\n", out.String())
	require.True(t, strings.HasPrefix(errb.String(), `starter: warning: session "demo": all `+strconv.Itoa(n)+` events are stored and the write lease is released, but closing the handle reported: `), errb.String())
	require.Nil(t, leaseOf(t, root, "none", "demo"))
	lines := catLines(t, root, "none", "demo")
	require.Equal(t, sample, strings.Join(lines[1:], "\n")+"\n")
}
