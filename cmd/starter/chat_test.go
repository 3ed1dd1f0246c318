package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// Input that is not a terminal is read line by line; a last line without a
// newline is a line; then io.EOF.
func TestChatInputPlainLines(t *testing.T) {
	ci := newChatInput(strings.NewReader("one\r\n\ntwo\nthree"), &bytes.Buffer{})
	require.False(t, ci.terminal)
	ctx := context.Background()
	var lines []string
	for {
		line, err := ci.readLine(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		lines = append(lines, line)
	}
	require.Equal(t, []string{"one", "", "two", "three"}, lines)
	_, err := ci.readLine(ctx)
	require.ErrorIs(t, err, io.EOF, "the end of the input stays the answer")
}

// SIGINT while the chat waits for a line is errInterrupted; so is a
// Ctrl-C byte the prompt's editor receives.
func TestChatInputInterrupt(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close()
	ci := newChatInput(r, &bytes.Buffer{})
	done := make(chan error, 1)
	go func() {
		_, err := ci.readLine(context.Background())
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	ci.interrupt()
	require.ErrorIs(t, <-done, errInterrupted)

	go func() { _, _ = w.Write([]byte("ab\x03")) }()
	buf := make([]byte, 8)
	n, err := editorReader{ci}.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "ab\x03", string(buf[:n]))
	require.True(t, ci.sawCtrlC)
}

// Lines typed during a turn arrive in pieces; takeLines returns the
// complete ones and keeps the rest.
func TestChatInputTakeLines(t *testing.T) {
	ci := newChatInput(strings.NewReader(""), &bytes.Buffer{})
	require.Empty(t, ci.takeLines([]byte("/ste")))
	require.Equal(t, []string{"/steer go on", "next"}, ci.takeLines([]byte("er go on\r\nnext\npart")))
	require.Equal(t, "part", string(ci.pending))
}

func TestChatRendering(t *testing.T) {
	ok := []wire.ToolResultContent{{Type: "tool-result", Content: []wire.TextContent{{Type: "text", Text: "alpha\n"}}}}
	require.Equal(t, "ok (6 bytes)", resultSummary(ok, nil))
	failed := []wire.ToolResultContent{{Type: "tool-result", IsError: true, Content: []wire.TextContent{{Type: "text", Text: "Error: \"../x\" is outside the working directory\nmore"}}}}
	require.Equal(t, `error: "../x" is outside the working directory`, resultSummary(failed, &wire.ToolError{Code: "OUTSIDE_CWD"}))
	require.Equal(t, "error: TOOL_OUTCOME_UNKNOWN", resultSummary([]wire.ToolResultContent{{IsError: true}}, &wire.ToolError{Code: "TOOL_OUTCOME_UNKNOWN"}))

	require.Equal(t, "abc", clip("abc", 3))
	require.Equal(t, "ab…", clip("abcd", 3))
	require.Equal(t, `{"a":1}`, argsLine("{\n  \"a\": 1\n}"))
	require.Equal(t, "not json", argsLine("not\n  json"))
	require.Equal(t, `{"command":"a > b && c < d","esc":"\\u003e","nl":"x\ny\u001b"}`,
		argsLine(`{"command": "a \u003e b \u0026\u0026 c \u003c d", "esc": "\\u003e", "nl": "x\ny\u001b"}`))

	user, _ := json.Marshal(map[string]string{"kind": "user"})
	require.Equal(t, "aborted by user", chatReason(&wire.TurnInfo{Reason: &wire.TurnEndReason{Kind: "aborted", Reason: user}}))
	require.Equal(t, "completed", chatReason(&wire.TurnInfo{Reason: &wire.TurnEndReason{Kind: "completed"}}))
}

// /compact runs between turns and takes no argument: typed during a turn,
// or with one, it is refused on the spot and nothing is sent (the chat has
// no client to send with).
func TestChatCompactRefusedDuringATurn(t *testing.T) {
	var out bytes.Buffer
	ch := &chat{w: &out}
	require.NoError(t, ch.handle(context.Background(), "/compact", true))
	require.Equal(t, "/compact runs between turns: type it again when the turn has ended\n", out.String())
	out.Reset()
	require.NoError(t, ch.handle(context.Background(), "/compact now", false))
	require.Equal(t, "/compact takes no argument\n", out.String())
}
