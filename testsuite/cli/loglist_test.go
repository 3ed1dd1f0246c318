package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// logCLI runs `starter log <args> --root root` offline and returns its
// stdout, stderr and error.
func logCLI(t *testing.T, root string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(bin.starter, append(append([]string{"log"}, args...), "--root", root)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

var nextPage = regexp.MustCompile(`^next page: --cursor (\S+)\n$`)

// TestLogListPagesWithLimitAndCursor: `log list --json --limit N` prints
// JSON lines and the cursor of the next page on stderr; following the
// cursors lists every session once, including when sessions are created
// between pages.
func TestLogListPagesWithLimitAndCursor(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store")
	var ids []string
	for i := 0; i < 7; i++ {
		id := fmt.Sprintf("s%d", i)
		cwd := []string{"/proj/a", "/proj/b"}[i%2]
		_, errOut, err := logCLI(t, root, "create", "--id", id, "--cwd", cwd)
		require.NoError(t, err, errOut)
		ids = append(ids, id)
	}
	seen := map[string]int{}
	var order []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		args := []string{"list", "--json", "--limit", "3"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		out, errOut, err := logCLI(t, root, args...)
		require.NoError(t, err, errOut)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if out == "" {
			lines = nil
		}
		require.LessOrEqual(t, len(lines), 3)
		var last string
		for _, line := range lines {
			var row struct {
				ID     string `json:"id"`
				Cwd    string `json:"cwd"`
				Cursor string `json:"cursor"`
			}
			require.NoError(t, json.Unmarshal([]byte(line), &row), line)
			seen[row.ID]++
			order = append(order, row.ID)
			last = row.Cursor
		}
		if pages == 0 {
			// Between pages: one session sorting before the cursor (in
			// the first project), one after it (in the last).
			for _, c := range [][]string{{"s00", "/proj/a"}, {"s9", "/proj/b"}} {
				_, errOut, err := logCLI(t, root, "create", "--id", c[0], "--cwd", c[1])
				require.NoError(t, err, errOut)
			}
		}
		m := nextPage.FindStringSubmatch(errOut)
		if m == nil {
			require.Equal(t, "", errOut)
			break
		}
		require.Equal(t, last, m[1], "the next page starts after the last row printed")
		cursor = m[1]
	}
	for _, id := range append(ids, "s9") {
		require.Equal(t, 1, seen[id], "%s listed %d times in %v", id, seen[id], order)
	}
	require.Zero(t, seen["s00"], "a session created before the cursor is not listed")
	require.Equal(t, []string{"s0", "s2", "s4", "s6", "s1", "s3", "s5", "s9"}, order)
}

// TestLogListTableLimitAndBadCursor: the table stops at --limit with the
// next cursor on stderr; a cursor no row carried is refused.
func TestLogListTableLimitAndBadCursor(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store")
	for _, id := range []string{"a", "b", "c"} {
		_, errOut, err := logCLI(t, root, "create", "--id", id)
		require.NoError(t, err, errOut)
	}
	out, errOut, err := logCLI(t, root, "list", "--limit", "2")
	require.NoError(t, err, errOut)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 3)
	require.Regexp(t, `^ID +CWD +CREATED +SIZE +PENDING +REVISION +PARENT$`, lines[0])
	require.Regexp(t, `^a +- `, lines[1])
	require.Regexp(t, `^b +- `, lines[2])
	require.Equal(t, "next page: --cursor _no-cwd/b\n", errOut)

	out, errOut, err = logCLI(t, root, "list", "--cursor", "_no-cwd/b")
	require.NoError(t, err, errOut)
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 2)
	require.Regexp(t, `^c +- `, lines[1])
	require.Equal(t, "", errOut)

	// The last page is empty, not an error.
	out, errOut, err = logCLI(t, root, "list", "--json", "--cursor", "_no-cwd/c")
	require.NoError(t, err, errOut)
	require.Equal(t, "", out)

	_, errOut, err = logCLI(t, root, "list", "--cursor", "bogus")
	require.Error(t, err)
	require.Contains(t, errOut, `invalid list cursor "bogus": pass the cursor of a listed row`)
	_, errOut, err = logCLI(t, root, "list", "--limit", "-1")
	require.Error(t, err)
	require.Contains(t, errOut, "--limit must be >= 0, got -1")
}
