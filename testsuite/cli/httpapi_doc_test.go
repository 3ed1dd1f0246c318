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
)

// httpDocSteps extracts the commands of the ```sh blocks of the section
// "## HTTP API" of docs/API.md, with the "#> text" lines their output
// must contain and their "#! exit N" status; other "#" lines and blank
// lines are commentary.
func httpDocSteps(t *testing.T, doc string) []docStep {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## HTTP API\n")
	require.True(t, ok, "docs/API.md has no HTTP API section")
	section, _, _ = strings.Cut(section, "\n## ")
	var steps []docStep
	n := 0
	for {
		var block string
		_, rest, ok := strings.Cut(section, "\n```sh\n")
		if !ok {
			break
		}
		block, section, ok = strings.Cut(rest, "\n```")
		require.True(t, ok, "a ```sh block is not closed")
		sc := bufio.NewScanner(strings.NewReader(block))
		for sc.Scan() {
			n++
			line := strings.TrimSpace(sc.Text())
			switch {
			case line == "":
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
				steps = append(steps, docStep{line: n, command: line})
			}
		}
	}
	return steps
}

// TestHTTPAPIDocExamples runs the curl examples of docs/API.md "HTTP API"
// with the real curl binary, in order, against worker --http and the
// scripted model they describe, and checks what each prints, so the
// document cannot drift from the server.
func TestHTTPAPIDocExamples(t *testing.T) {
	curl, err := exec.LookPath("curl")
	require.NoError(t, err, "the examples need curl")
	doc, err := os.ReadFile("../../docs/API.md")
	require.NoError(t, err)
	steps := httpDocSteps(t, string(doc))
	require.GreaterOrEqual(t, len(steps), 15, "the HTTP API examples lost their commands")

	h := startHTTPWorker(t, answer("Hello from the script."), runCommand("c1", "echo hi > hi.txt"), answer("Wrote hi.txt."))
	binDir := t.TempDir()
	require.NoError(t, os.Symlink(bin.starter, filepath.Join(binDir, "starter")))
	require.NoError(t, os.Symlink(curl, filepath.Join(binDir, "curl")))
	cfgDir := t.TempDir()
	environ := append(os.Environ(),
		"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SESSIONFLOW_URL="+h.base,
		fmt.Sprintf("TEMPORAL_ADDRESS=127.0.0.1:%d", h.port),
		"TEMPORAL_NAMESPACE="+h.namespace,
		"SESSIONFLOW_TASK_QUEUE="+h.taskQueue,
		"TEMPORAL_CONFIG_FILE="+filepath.Join(cfgDir, "temporal.toml"),
		"HOME="+cfgDir,
	)
	for _, s := range steps {
		ctx, cancel := context.WithTimeout(h.ctx, 90*time.Second)
		cmd := exec.CommandContext(ctx, "sh", "-c", s.command)
		cmd.Env, cmd.Dir = environ, h.project
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
		require.Equal(t, s.exit, code, "line %d: %s\n%s\n%s", s.line, s.command, out.String(), h.logs())
		for _, want := range s.contains {
			require.Contains(t, out.String(), want, "line %d: %s", s.line, s.command)
		}
	}
}
