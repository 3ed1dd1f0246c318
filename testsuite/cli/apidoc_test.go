package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/jsonl"
)

// docStep is one command of the worked example in docs/API.md with what
// its output must contain and its expected exit status.
type docStep struct {
	line     int
	command  string
	contains []string
	exit     int
}

// exampleSteps extracts the worked example: the first ```sh block after
// the heading "## Worked example with the `temporal` CLI". Lines starting
// with "temporal " are commands; "#> text" lines follow a command and give
// text its output contains; "#! exit N" gives its exit status; other "#"
// lines and blank lines are commentary.
func exampleSteps(t *testing.T, doc string) []docStep {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## Worked example with the `temporal` CLI\n")
	require.True(t, ok, "docs/API.md has no worked example section")
	_, block, ok := strings.Cut(section, "\n```sh\n")
	require.True(t, ok, "the worked example has no ```sh block")
	block, _, ok = strings.Cut(block, "\n```")
	require.True(t, ok, "the ```sh block is not closed")
	var steps []docStep
	sc := bufio.NewScanner(strings.NewReader(block))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
		case strings.HasPrefix(line, "temporal "):
			steps = append(steps, docStep{line: n, command: line})
		case strings.HasPrefix(line, "#> "):
			require.NotEmpty(t, steps, "line %d: %q follows no command", n, line)
			steps[len(steps)-1].contains = append(steps[len(steps)-1].contains, strings.TrimPrefix(line, "#> "))
		case strings.HasPrefix(line, "#! exit "):
			require.NotEmpty(t, steps, "line %d: %q follows no command", n, line)
			code, err := strconv.Atoi(strings.TrimPrefix(line, "#! exit "))
			require.NoError(t, err, "line %d", n)
			steps[len(steps)-1].exit = code
		case strings.HasPrefix(line, "#"):
		default:
			t.Fatalf("line %d of the worked example is neither a temporal command nor a comment: %q", n, line)
		}
	}
	return steps
}

// TestAPIDocExample runs the worked example of docs/API.md with the
// `temporal` CLI binary alone against a fresh dev server and worker on the
// default namespace and task queue, so the document cannot drift from the
// code. It covers create, append, an idempotent retry, terminate, a resume
// that recovers from the dead owner without unlock, dispose, a non-ASCII id
// and a refused foreign workflow id.
func TestAPIDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/API.md")
	require.NoError(t, err)
	steps := exampleSteps(t, string(doc))
	require.GreaterOrEqual(t, len(steps), 10, "the worked example lost its commands")

	cli, err := devserver.Locate(context.Background(), devserver.LocateOptions{})
	require.NoError(t, err)
	binDir := t.TempDir()
	require.NoError(t, os.Symlink(cli, filepath.Join(binDir, "temporal")))

	e := newEnv(t)
	e.taskQueue = "sessionflow" // the default the document names
	e.startWorker(true)

	cfgDir := t.TempDir()
	environ := append(os.Environ(),
		"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		fmt.Sprintf("TEMPORAL_ADDRESS=127.0.0.1:%d", e.port),
		"TEMPORAL_NAMESPACE=default",
		// No profile of the machine may redirect the CLI.
		"TEMPORAL_CONFIG_FILE="+filepath.Join(cfgDir, "temporal.toml"),
		"HOME="+cfgDir,
	)
	for _, s := range steps {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		cmd := exec.CommandContext(ctx, "sh", "-c", s.command)
		cmd.Env = environ
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		code := 0
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			code = exitErr.ExitCode()
		} else {
			require.NoError(t, err, "line %d: %s", s.line, s.command)
		}
		require.Equal(t, s.exit, code, "line %d: %s\n%s\nworker log:\n%s", s.line, s.command, out.String(), e.workerLog)
		for _, want := range s.contains {
			require.Contains(t, out.String(), want, "line %d: %s", s.line, s.command)
		}
	}

	// What the example says it stored is what the store holds.
	events := e.stored("demo-1")
	requireContiguous(t, events)
	var types []string
	for _, ev := range events {
		types = append(types, ev.Type)
	}
	require.Equal(t, []string{"turn/start", "turn/end", "turn/start", "turn/end", "session/end-seed"}, types)
	te, err := events[3].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "interrupted", te.Reason.Kind)
	st, err := jsonl.NewStore(jsonl.Options{Root: e.root, Compression: jsonl.CompressionNone})
	require.NoError(t, err)
	lease, err := st.LeaseOf(context.Background(), "demo-1")
	require.NoError(t, err)
	require.Nil(t, lease, "dispose released the lease")
	lease, err = st.LeaseOf(context.Background(), "é")
	require.NoError(t, err)
	require.NotNil(t, lease, "the live non-ASCII session holds its lease")
	require.Equal(t, "session/%C3%A9", lease.Owner.WorkflowID)
	has, err := st.Has(context.Background(), "cli-x")
	require.NoError(t, err)
	require.False(t, has, "the refused start stored nothing")
}
