package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// What a hostile model sends: window titles, a screen clear, colours, a
// carriage return that rewrites its line, a right-to-left override, the
// one-rune CSI U+009B, in its answer, its tool calls' names, ids and
// arguments, a command's output, and a provider error.
const (
	hostileAnswer = "Look\x1b]0;PWNED\a here\x1b[2J \x1b[31mred\x1b[0m \u202egnp.exe \u009b31m 10%\rDONE\nline two\ttabbed"
	hostileEnd    = "Done\x1b[2J \u202eevil\u202c ok\nsecond line"
	hostileName   = "ghost\x1b]0;T\a"
	hostileCallID = "id\x1b[2J\u202e2"
	hostileError  = "boom\x1b]0;FAIL\a\u202e\nforged line"
	// hostileCommand prints an OSC title, a screen clear and U+202E
	// (octal UTF-8) and fails.
	hostileCommand = `printf '\033]0;OWNED\007\033[2Jout\342\200\256'; exit 3`
)

// hostileScript writes the script of the hostile model: a first turn that
// streams hostileAnswer, runs hostileCommand, calls an unknown tool named
// hostileName and ends with hostileEnd; a second turn that fails with
// hostileError.
func hostileScript(t *testing.T) string {
	t.Helper()
	type call struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type fail struct {
		Status  int    `json:"status"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	type response struct {
		Text      string `json:"text,omitempty"`
		ChunkSize int    `json:"chunkSize,omitempty"`
		ToolCalls []call `json:"toolCalls,omitempty"`
		Fail      *fail  `json:"fail,omitempty"`
	}
	command, err := json.Marshal(map[string]string{"command": hostileCommand})
	require.NoError(t, err)
	b, err := json.Marshal(map[string][]response{"responses": {
		{Text: hostileAnswer, ChunkSize: 3, ToolCalls: []call{{ID: "c1", Name: "run_command", Arguments: string(command)}}},
		{ToolCalls: []call{{ID: hostileCallID, Name: hostileName, Arguments: "{\"note\":\"\u202e\u009b\"}"}}},
		{Text: hostileEnd, ChunkSize: 4},
		{Text: "never shown", Fail: &fail{Status: 400, Code: "bad_request", Message: hostileError}},
	}})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// editorMoves are the cursor moves and line erasures the chat's line
// editor (golang.org/x/term) writes at its prompt: the only escape
// sequences the starter itself prints.
var editorMoves = regexp.MustCompile(`\x1b\[[0-9]*[A-DK]`)

// requireNoRawControls fails when out, what reached a terminal, holds an
// escape sequence but the line editor's own, a control character, a
// bidirectional formatting character or a C1 control (a carriage return
// only as the terminal's own newline, CR LF).
func requireNoRawControls(t *testing.T, out string) {
	t.Helper()
	rest := editorMoves.ReplaceAllString(out, "")
	for _, bad := range []string{"\x1b", "\a", "\u202e", "\u202c", "\u009b", "\x9b"} {
		require.NotContains(t, rest, bad, "a raw %q reached the terminal:\n%q", bad, out)
	}
	require.NotContains(t, strings.ReplaceAll(rest, "\r\n", "\n"), "\r", "a raw carriage return reached the terminal:\n%q", out)
	require.True(t, utf8.ValidString(out), "invalid UTF-8 reached the terminal:\n%q", out)
}

// A hostile model's answer, tool calls, command output and errors reach the
// terminal of `starter chat` (streamed, in tool lines, in /history) and of
// `starter turn` as visible escapes, never as the sequences themselves;
// newlines and tabs of the answer are printed as they are.
func TestHostileTextReachesTheTerminalEscaped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := newEnv(t)
	e.workerArgs = []string{"--provider-script", hostileScript(t), "--enable-run-command"}
	e.startWorker(true)
	cwd := t.TempDir()

	term := e.chat("--id", "h1", "--cwd", cwd, "--provider", "scripted", "--model", "m1", "--root", e.root)
	term.expect(`session "h1" created`)
	term.expect("> ")
	term.typeKeys("hello\r")
	// The streamed answer: each sequence shows as its escape, the newline
	// and the tab stay (the terminal writes a newline as CR LF).
	term.expect(`Look\x1b]0;PWNED\a here\x1b[2J \x1b[31mred\x1b[0m \u202egnp.exe \u009b31m 10%\rDONE` + "\r\nline two\ttabbed")
	term.expect(`⚙ run_command {"command":"printf '\\033]0;OWNED\\007\\033[2Jout\\342\\200\\256'; exit 3"} → error: \x1b]0;OWNED\a\x1b[2Jout\u202e`)
	term.expect(`⚙ "ghost\x1b]0;T\a" {"note":"\u202e\u009b"} → error: tool "ghost\x1b]0;T\a" not found`)
	term.expect(`Done\x1b[2J \u202eevil\u202c ok` + "\r\nsecond line")
	term.expect("[turn 1 completed]")
	term.expect("> ")
	term.typeKeys("again\r")
	term.expect(`boom\x1b]0;FAIL\a\u202e\nforged line`)
	term.expect("> ")
	term.typeKeys("/history\r")
	// (/history folds whitespace, the carriage return's too.)
	term.expect(`assistant: Look\x1b]0;PWNED\a here\x1b[2J \x1b[31mred\x1b[0m \u202egnp.exe \u009b31m 10% DONE line two tabbed`)
	term.expect(`⚙ "ghost\x1b]0;T\a" {"note":"\u202e\u009b"} → error: `)
	term.expect(`assistant: Done\x1b[2J \u202eevil\u202c ok second line`)
	term.expect("> ")
	term.typeKeys("\x03")
	term.expect(`session "h1" disposed`)
	require.NoError(t, term.wait(), term.out.String())
	requireNoRawControls(t, term.out.String())

	// `starter turn` on a terminal: the tool lines name the hostile tool
	// and call id quoted, the answer keeps its newline.
	e.mustStarter("", "create", "--id", "h2", "--cwd", cwd, "--provider", "scripted", "--model", "m1")
	// (turn prints the text of an earlier step only when a poll saw it
	// stream; the answer, the last step's text, it always prints.)
	term = e.onTerminal("turn", "--id", "h2", "--prompt", "hello", "--root", e.root)
	term.expect(`✗ run_command (c1) COMMAND_FAILED`)
	term.expect(`✗ "ghost\x1b]0;T\a" ("id\x1b[2J\u202e2") TOOL_NOT_FOUND`)
	term.expect(`Done\x1b[2J \u202eevil\u202c ok` + "\r\nsecond line")
	term.expect("turn 1 completed")
	require.NoError(t, term.wait(), term.out.String())
	requireNoRawControls(t, term.out.String())

	term = e.onTerminal("turn", "--id", "h2", "--prompt", "again", "--root", e.root)
	term.expect(`boom\x1b]0;FAIL\a\u202e\nforged line`)
	require.NoError(t, term.wait(), term.out.String())
	requireNoRawControls(t, term.out.String())

	// --json: every line is JSON without a raw control, and decodes to the
	// model's text as it was sent.
	e.mustStarter("", "create", "--id", "h3", "--cwd", cwd, "--provider", "scripted", "--model", "m1")
	out := e.mustStarterCtx(ctx, "", "turn", "--id", "h3", "--prompt", "hello", "--json", "--root", e.root)
	requireNoRawControls(t, out)
	var values []any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v), "line %q", sc.Text())
		values = append(values, v)
	}
	require.NoError(t, sc.Err())
	for _, want := range []string{hostileAnswer, hostileEnd, hostileName, hostileCallID} {
		require.True(t, holdsString(values, want), "no JSON value decodes to %q:\n%s", want, out)
	}
}

// holdsString reports whether the decoded JSON v holds the string s.
func holdsString(v any, s string) bool {
	switch v := v.(type) {
	case string:
		return v == s
	case []any:
		for _, x := range v {
			if holdsString(x, s) {
				return true
			}
		}
	case map[string]any:
		for _, x := range v {
			if holdsString(x, s) {
				return true
			}
		}
	}
	return false
}

// An error that carries what a caller sent (here a flag name with a title
// sequence, U+202E and a newline) reaches the terminal on one line, its
// controls as visible escapes.
func TestErrorsReachTheTerminalEscaped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.starter, "log", "list", "--root", t.TempDir(), "--x\x1b]0;T\a\u202e\nforged")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.Error(t, cmd.Run())
	requireNoRawControls(t, stderr.String())
	require.Equal(t, `starter: unknown flag: --x\x1b]0;T\a\u202e\nforged`+"\nRun 'starter log list --help' for usage.\n", stderr.String())
}
