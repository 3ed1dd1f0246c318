package harness

import (
	"encoding/json"
	"strings"
	"testing"
)

// listRows decodes the output of `starter log list --json`: one JSON
// object per line.
func listRows[T any](t *testing.T, out string) []T {
	t.Helper()
	var rows []T
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var row T
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("log list --json %q: %v", out, err)
		}
		rows = append(rows, row)
	}
	return rows
}
