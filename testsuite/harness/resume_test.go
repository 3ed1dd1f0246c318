package harness

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/jsonl"
)

// copyRoot copies a root with its file modes.
func copyRoot(t *testing.T, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v\n%s", err, out)
	}
	return to
}

// TestResumeMigratesHarnessLogs: resuming a session the harness wrote (a
// write open, as `log repair` does) publishes a v3 generation beside the
// untouched v0 file, holding what the harness's own load stores (the
// interrupted-turn closers, the torn tail cut) plus the end-seed marker; the
// fork's seedLength becomes the inherited count.
func TestResumeMigratesHarnessLogs(t *testing.T) {
	for _, comp := range encodings {
		t.Run(comp, func(t *testing.T) {
			harnessRoot := t.TempDir()
			harnessSessions(t, harnessRoot, comp)
			root := copyRoot(t, harnessRoot)
			ids := []string{"done", "fork", "open", "torn"}

			// What the harness itself stores when it loads each session.
			var ops []op
			for _, id := range ids {
				ops = append(ops, op{"op": "load", "id": id}, op{"op": "readFrom", "id": id, "fromSeq": 0})
			}
			rs := runHarness(t, harnessRoot, comp, ops...)

			st := openStore(t, root, comp)
			ctx := context.Background()
			for i, id := range ids {
				mustOK(t, "load "+id, rs[2*i])
				meta, want := harnessEvents(t, mustOK(t, "readFrom "+id, rs[2*i+1]))
				oldPath := logPath(root, id, 0, comp)
				before, err := os.ReadFile(oldPath)
				if err != nil {
					t.Fatal(err)
				}
				out, errOut, err := starter(t, "log", "repair", "--id", id, "--root", root, "--compression", comp)
				if err != nil {
					t.Fatalf("log repair %s: %v\n%s%s", id, err, out, errOut)
				}
				after, err := os.ReadFile(oldPath)
				if err != nil || !bytes.Equal(before, after) {
					t.Fatalf("%s: the v0 file changed by the migration (err %v)", id, err)
				}
				if _, err := os.Stat(logPath(root, id, 3, comp)); err != nil {
					t.Fatalf("%s: no v3 generation after the resume: %v", id, err)
				}
				h, got := readAll(t, st, id)
				if h.Header().Version != 3 {
					t.Fatalf("%s: served header version %d after the migration, want 3", id, h.Header().Version)
				}
				// Expected: the harness's stored log, plus the end-seed marker
				// unless it already ends with one.
				last := want[len(want)-1].(map[string]any)
				if last["type"] != "session/end-seed" {
					want = append(want, map[string]any{"type": "session/end-seed", "seq": float64(len(want)), "time": last["time"], "data": map[string]any{}})
				}
				if seed, ok := meta["seedLength"].(float64); ok {
					// The fork marker the harness wrote carries the
					// inherited count in v3.
					at := int(seed)
					if want[at].(map[string]any)["type"] != "session/end-seed" {
						at--
					}
					want[at].(map[string]any)["data"] = map[string]any{"inherited": true}
					if !h.Header().IsSeeded || h.InheritedEventCount() != int64(at) {
						t.Fatalf("%s: seeded %t inherited %d, want seeded with %d", id, h.Header().IsSeeded, h.InheritedEventCount(), at)
					}
				} else if h.Header().IsSeeded {
					t.Fatalf("%s: an unseeded v0 session became seeded", id)
				}
				equalJSON(t, "stored events of "+id, asJSON(t, got), want)
				out, errOut, err = starter(t, "log", "inspect", "--json", "--id", id, "--root", root, "--compression", comp)
				if err != nil || !strings.Contains(out, `"migratedFrom": "`+filepath.Base(oldPath)+`"`) || !strings.Contains(out, `"formatVersion": 3`) {
					t.Fatalf("%s: log inspect after the migration: %v\n%s%s", id, err, out, errOut)
				}
				rec, err := os.ReadFile(filepath.Join(filepath.Dir(oldPath), "session.migration.json"))
				if err != nil || !strings.Contains(string(rec), `"from":"`+filepath.Base(oldPath)+`"`) {
					t.Fatalf("%s: migration record %s (%v)", id, rec, err)
				}
			}
			// From now on the v3 generation is the session: a second resume
			// migrates nothing and appends nothing.
			out, errOut, err := starter(t, "log", "repair", "--id", "open", "--root", root, "--compression", comp)
			if err != nil || strings.TrimSpace(out) != "nothing to repair" {
				t.Fatalf("second repair: %v\n%s%s", err, out, errOut)
			}

			// The harness still reads its own (old) file; when it writes to
			// it again (its load closes the interrupted turn), the two
			// generations diverge and sessionflow reports the conflict.
			rs = runHarness(t, root, comp, op{"op": "load", "id": "open"})
			mustOK(t, "load open after the migration", rs[0])
			_, err = st.Open(ctx, "open", jsonl.AccessRead, jsonl.OpenOptions{})
			if !errors.Is(err, jsonl.ErrGenerationConflict) {
				t.Fatalf("read after the harness wrote the old generation: %v, want a generation conflict", err)
			}
			if !strings.Contains(err.Error(), "the older was written after the migration") {
				t.Fatalf("conflict text: %v", err)
			}
		})
	}
}

// TestHarnessCreateBesideSessionflowIsAConflict: the harness's create of an
// id sessionflow already holds writes session.jsonl beside
// session.v3.jsonl; every sessionflow command then reports the conflict
// instead of serving either log.
func TestHarnessCreateBesideSessionflowIsAConflict(t *testing.T) {
	for _, comp := range encodings {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			if out, errOut, err := starter(t, "log", "create", "--id", "shared", "--cwd", "/work/project", "--root", root, "--compression", comp); err != nil {
				t.Fatalf("log create: %v\n%s%s", err, out, errOut)
			}
			rs := runHarness(t, root, comp,
				op{"op": "create", "meta": meta("shared")},
				op{"op": "append", "id": "shared", "events": completedTurn(0, 1)})
			mustOK(t, "create", rs[0])
			mustOK(t, "append", rs[1])
			if _, err := os.Stat(logPath(root, "shared", 0, comp)); err != nil {
				t.Fatalf("the harness did not write its generation: %v", err)
			}

			st := openStore(t, root, comp)
			ctx := context.Background()
			const want = "holds two generations"
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, jsonl.ErrGenerationConflict) || !strings.Contains(err.Error(), want) {
					t.Fatalf("%s: %v, want a generation conflict", what, err)
				}
			}
			_, err := st.Open(ctx, "shared", jsonl.AccessRead, jsonl.OpenOptions{})
			check("read", err)
			_, err = st.Open(ctx, "shared", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "w1"})
			check("write", err)
			_, err = st.Stat(ctx, "shared")
			check("stat", err)
			_, err = st.Inspect(ctx, "shared")
			check("inspect", err)
			_, err = st.Migrate(ctx, "shared", jsonl.MigrateOptions{})
			check("migrate", err)
			for _, args := range [][]string{{"cat", "--id", "shared"}, {"inspect", "--id", "shared"}, {"repair", "--id", "shared"}} {
				out, errOut, err := starter(t, append(append([]string{"log"}, args...), "--root", root, "--compression", comp)...)
				if err == nil || !strings.Contains(errOut, want) {
					t.Fatalf("log %s: %v\n%s%s", args[0], err, out, errOut)
				}
			}
			snaps, err := st.List(ctx)
			if err != nil || len(snaps) != 1 || snaps[0].Problem == nil || snaps[0].Header.ID != "shared" ||
				!errors.Is(snaps[0].Problem, jsonl.ErrGenerationConflict) {
				t.Fatalf("list: %+v, %v; want one row with the conflict", snaps, err)
			}
			out, errOut, err := starter(t, "log", "list", "--json", "--root", root, "--compression", comp)
			if err != nil && out == "" {
				t.Fatalf("log list: %v\n%s", err, errOut)
			}
			rows := listRows[struct {
				ID            string `json:"id"`
				FormatVersion *int   `json:"formatVersion"`
				Error         *struct {
					Reason string `json:"reason"`
					Code   string `json:"code"`
				} `json:"error"`
			}](t, out)
			if len(rows) != 1 || rows[0].ID != "shared" || rows[0].Error == nil || rows[0].FormatVersion != nil ||
				rows[0].Error.Code != "SessionGenerationConflict" || !strings.Contains(rows[0].Error.Reason, want) {
				t.Fatalf("log list --json does not show the conflict: %s", out)
			}
		})
	}
}
