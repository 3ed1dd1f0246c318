package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// jsonLines decodes the output of `log list --json`: one JSON object per
// line, each line complete.
func jsonLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var rows []T
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row T
		require.NoError(t, json.Unmarshal(sc.Bytes(), &row), "line %q", sc.Text())
		rows = append(rows, row)
	}
	require.NoError(t, sc.Err())
	require.True(t, out == "" || strings.HasSuffix(out, "\n"), "unterminated last line in %q", out)
	return rows
}
