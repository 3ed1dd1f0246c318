package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
	"github.com/sessionflow/sessionflow/wire"
)

// run executes the command line args and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdin, stdout, stderr)
}

// compressions are the encodings every store-level test runs under.
var compressions = []string{"none", "zstd"}

// result is the outcome of one in-process invocation.
type result struct {
	code   int
	stdout string
	stderr string
}

// cliDeadline bounds one in-process command of a test: the demo (an
// embedded dev server, three workers, two SIGKILLs, a five-second tool) is
// the longest, about a minute on a loaded machine. A command still running
// then fails its test by name with what it printed, and is cancelled.
const cliDeadline = 5 * time.Minute

// runCLI runs the command line with stdin and captures its streams; the
// command's context is cancelled at the test's deadline.
func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dog := testdeadline.Watch(t, cliDeadline, func() string {
		return fmt.Sprintf("starter %s has not returned; stdout so far:\n%s\nstderr so far:\n%s", strings.Join(args, " "), out.String(), errb.String())
	}, cancel)
	code := runContext(ctx, args, strings.NewReader(stdin), &out, &errb)
	dog.Stop()
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// logCmd runs `starter log <sub> --root root --compression comp <rest...>`.
func logCmd(t *testing.T, root, comp, stdin, sub string, rest ...string) result {
	t.Helper()
	args := append([]string{"log", sub, "--root", root, "--compression", comp}, rest...)
	return runCLI(t, stdin, args...)
}

// mustOK fails the test unless r succeeded.
func mustOK(t *testing.T, r result) result {
	t.Helper()
	require.Equalf(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.NotContains(t, r.stderr, "starter: ")
	return r
}

// mustFail fails the test unless r exited with code and printed a stderr
// line "starter: ...<want>...".
func mustFail(t *testing.T, r result, code int, want string) {
	t.Helper()
	require.Equalf(t, code, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.True(t, strings.HasPrefix(r.stderr, "starter: "), "stderr: %q", r.stderr)
	require.Contains(t, r.stderr, want)
}

// newTestStore opens a store over root for direct manipulation.
func newTestStore(t *testing.T, root, comp string) *jsonl.Store {
	t.Helper()
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.Compression(comp)})
	require.NoError(t, err)
	return st
}

// logPath is the log file of a session created without a cwd.
func logPath(t *testing.T, root, comp, id string) string {
	t.Helper()
	seg, err := jsonl.EncodeSegment(id)
	require.NoError(t, err)
	name := "session.v3.jsonl"
	if comp == "zstd" {
		name += ".zstd"
	}
	return filepath.Join(root, "_no-cwd", seg, name)
}

// catLines runs `log cat` and returns its lines.
func catLines(t *testing.T, root, comp, id string) []string {
	t.Helper()
	r := mustOK(t, logCmd(t, root, comp, "", "cat", "--id", id))
	require.True(t, strings.HasSuffix(r.stdout, "\n"), "cat output must end with a newline: %q", r.stdout)
	return strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
}

// decodeEvents decodes JSONL event lines strictly.
func decodeEvents(t *testing.T, lines []string) []session.Event {
	t.Helper()
	out := make([]session.Event, 0, len(lines))
	for _, l := range lines {
		var e session.Event
		require.NoError(t, json.Unmarshal([]byte(l), &e), "line %q", l)
		out = append(out, e)
	}
	return out
}

// jsonlOf encodes events as JSONL.
func jsonlOf(t *testing.T, events ...session.Event) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		line, err := e.MarshalJSON()
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// ev builds a valid event.
func ev(t *testing.T, typ string, seq, time int64, data string) session.Event {
	t.Helper()
	e, err := session.NewEvent(typ, seq, time, json.RawMessage(data))
	require.NoError(t, err)
	return e
}

// openTurnEvents is a log that crashed inside a tool call: turn 1, step 1,
// an assistant message requesting call-1 (and call-2 when twoCalls), and the
// tool/call recording call-1 as started.
func openTurnEvents(t *testing.T, twoCalls bool) []session.Event {
	t.Helper()
	calls := `{"type":"tool-call","id":"call-1","name":"read_file","arguments":{"path":"a.txt"}}`
	if twoCalls {
		calls += `,{"type":"tool-call","id":"call-2","name":"read_file","arguments":{"path":"b.txt"}}`
	}
	msg := ev(t, wire.TypeAssistantMessage, 2, 1700000000200,
		`{"turn":1,"step":1,"message":{"role":"assistant","content":[`+calls+`]},"stream":[]}`)
	msg.SurfaceOp = session.AppendOp()
	return []session.Event{
		ev(t, wire.TypeTurnStart, 0, 1700000000000, `{"turn":1}`),
		ev(t, wire.TypeStepStart, 1, 1700000000100, `{"turn":1,"step":1}`),
		msg,
		ev(t, wire.TypeToolCall, 3, 1700000000300, `{"turn":1,"step":1,"callId":"call-1","name":"read_file","arguments":"{\"path\":\"a.txt\"}"}`),
	}
}

// readFile reads a whole file.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// appendBytes appends raw bytes to a file, as a crash mid-write leaves them.
func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// leaseOf reads the current lease through a fresh store.
func leaseOf(t *testing.T, root, comp, id string) *wire.Lease {
	t.Helper()
	l, err := newTestStore(t, root, comp).LeaseOf(context.Background(), id)
	require.NoError(t, err)
	return l
}
