package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// `log list` shows ids and cwds with control characters escaped: nothing
// of them reaches the terminal raw, and every session stays on one row.
func TestLogListEscapesIDs(t *testing.T) {
	root := t.TempDir()
	for _, id := range []string{"plain", "日本", "two\nlines", "\x1b[31mred", "tab\there"} {
		mustOK(t, logCmd(t, root, "none", "", "create", "--id", id))
	}
	mustOK(t, logCmd(t, root, "none", "", "create", "--id", "cwd-odd", "--cwd", "/w/\x1b]0;title\x07"))
	r := mustOK(t, logCmd(t, root, "none", "", "list"))
	require.NotContains(t, r.stdout, "\x1b")
	require.NotContains(t, r.stdout, "\x07")
	rows := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, rows, 7, "a header and one row per session:\n%s", r.stdout)
	var firsts []string
	for _, row := range rows[1:] {
		firsts = append(firsts, strings.Fields(row)[0])
	}
	require.ElementsMatch(t, []string{"plain", "日本", `"two\nlines"`, `"\x1b[31mred"`, `"tab\there"`, "cwd-odd"}, firsts)
	require.Contains(t, r.stdout, `"/w/\x1b]0;title\a"`)
}

func TestDisplayText(t *testing.T) {
	require.Equal(t, "plain id", displayText("plain id"))
	require.Equal(t, "日本", displayText("日本"))
	require.Equal(t, `""`, displayText(""))
	require.Equal(t, `"a\nb"`, displayText("a\nb"))
	require.Equal(t, `"\xff"`, displayText("\xff"))
	require.Equal(t, `"\u202e"`, displayText("\u202e"))
}

// Prose keeps its lines and tabs and shows every control sequence as text.
func TestTermText(t *testing.T) {
	require.Equal(t, "plain 日本 text\n\tindented", termText("plain 日本 text\n\tindented", true))
	require.Equal(t, `title\x1b]0;PWNED\a clear\x1b[2J csi\u009b31m bidi\u202eexe\u2066 cr\rover`+"\nnext\tcol",
		termText("title\x1b]0;PWNED\a clear\x1b[2J csi\u009b31m bidi\u202eexe\u2066 cr\rover\nnext\tcol", true))
	require.Equal(t, `one\nline\ttab\x7f\xff`, termText("one\nline\ttab\x7f\xff", false))
	require.Equal(t, "replacement \uFFFD stays", termText("replacement \uFFFD stays", true))
}

// JSON output keeps its meaning and loses its raw controls.
func TestTermJSON(t *testing.T) {
	in := "{\"text\":\"a\u202eb\u009bc\x7fd\"}"
	out := termJSON([]byte(in))
	require.Equal(t, `{"text":"a\u202eb\u009bc\u007fd"}`, string(out))
	var a, b map[string]string
	require.NoError(t, json.Unmarshal([]byte(in), &a))
	require.NoError(t, json.Unmarshal(out, &b))
	require.Equal(t, a, b)
}

// `log inspect` shows a header's fields with their control characters
// escaped, each row on its line.
func TestLogInspectEscapesHeaderFields(t *testing.T) {
	root := t.TempDir()
	mustOK(t, logCmd(t, root, "none", "", "create", "--id", "odd", "--cwd", "/w/\x1b]0;title\x07\u202e\nforged"))
	r := mustOK(t, logCmd(t, root, "none", "", "inspect", "--id", "odd"))
	require.NotContains(t, r.stdout, "\x1b")
	require.NotContains(t, r.stdout, "\u202e")
	require.Contains(t, r.stdout, `cwd:             /w/\x1b]0;title\a\u202e\nforged`+"\n")
}
