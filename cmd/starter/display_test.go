package main

import (
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
