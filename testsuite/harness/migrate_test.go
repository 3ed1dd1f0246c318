package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogMigrateHarnessRoot: `log migrate` converts a root the harness
// wrote offline: --dry-run writes nothing, --all migrates every v0 session
// with a progress line per session, and the harness still reads its own
// files afterwards.
func TestLogMigrateHarnessRoot(t *testing.T) {
	for _, comp := range encodings {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			harnessSessions(t, root, comp)
			const extra = 30
			var ops []op
			for i := range extra {
				id := fmt.Sprintf("bulk-%02d", i)
				ops = append(ops, op{"op": "create", "meta": meta(id)}, op{"op": "append", "id": id, "events": completedTurn(0, 1)})
			}
			for i, r := range runHarness(t, root, comp, ops...) {
				mustOK(t, fmt.Sprint("bulk op ", i), r)
			}
			total := extra + 4
			flags := []string{"--root", root, "--compression", comp}
			// A directory this build cannot serve is shown and not counted.
			bad := filepath.Join(root, "--work-project--", "newer", "session.v4.jsonl")
			if comp == "zstd" {
				bad += ".zstd"
			}
			if err := os.MkdirAll(filepath.Dir(bad), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bad, nil, 0o600); err != nil {
				t.Fatal(err)
			}

			out, errOut, err := starter(t, append([]string{"log", "migrate", "--all", "--dry-run"}, flags...)...)
			if err != nil {
				t.Fatalf("migrate --dry-run: %v\n%s%s", err, out, errOut)
			}
			if !strings.Contains(out, fmt.Sprintf("would migrate %d of %d format v0 sessions", total, total)) ||
				!strings.Contains(out, "skipped "+filepath.Dir(bad)+": ") {
				t.Fatalf("migrate --dry-run output:\n%s", out)
			}
			if _, err := os.Stat(logPath(root, "done", 3, comp)); !os.IsNotExist(err) {
				t.Fatalf("--dry-run wrote a v3 generation: %v", err)
			}

			out, errOut, err = starter(t, append([]string{"log", "migrate", "--all"}, flags...)...)
			if err != nil {
				t.Fatalf("migrate --all: %v\n%s%s", err, out, errOut)
			}
			if !strings.Contains(out, fmt.Sprintf("migrated %d of %d format v0 sessions", total, total)) ||
				!strings.Contains(out, `session "torn": migrated session.jsonl`) || !strings.Contains(out, "a torn tail of") ||
				!strings.Contains(out, `session "fork": migrated`) || !strings.Contains(out, "6 inherited") {
				t.Fatalf("migrate --all output:\n%s", out)
			}
			for i := 1; i <= total; i++ {
				if !strings.Contains(errOut, fmt.Sprintf("migrate [%d/%d] ", i, total)) {
					t.Fatalf("no progress line %d/%d on stderr:\n%s", i, total, errOut)
				}
			}
			for _, id := range []string{"done", "fork", "open", "torn", "bulk-00", "bulk-29"} {
				if _, err := os.Stat(logPath(root, id, 3, comp)); err != nil {
					t.Fatalf("%s: no v3 generation: %v", id, err)
				}
			}
			out, _, err = starter(t, append([]string{"log", "migrate", "--all"}, flags...)...)
			if err != nil || !strings.Contains(out, "no format v0 sessions") {
				t.Fatalf("second migrate --all: %v\n%s", err, out)
			}
			out, _, err = starter(t, append([]string{"log", "migrate", "--id", "fork"}, flags...)...)
			if err != nil || !strings.Contains(out, `session "fork" is already format v3`) {
				t.Fatalf("migrate --id of a migrated session: %v\n%s", err, out)
			}
			// The harness still reads its own, untouched files.
			rs := runHarness(t, root, comp, op{"op": "list"}, op{"op": "readFrom", "id": "open", "fromSeq": 0})
			mustOK(t, "list", rs[0])
			mustOK(t, "readFrom", rs[1])
		})
	}
}
