package harness

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// jsonLines renders events as JSONL.
func jsonLines(t *testing.T, events []any) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestSharedV0Root: on a root configured for format v0, what sessionflow
// writes the harness lists, loads (repairing an interrupted turn), and
// appends to, and sessionflow then reads the harness's result; a harness
// session that sessionflow resumes stays v0, in place. Nothing is migrated.
func TestSharedV0Root(t *testing.T) {
	for _, comp := range encodings {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			flags := []string{"--root", root, "--compression", comp, "--format", "v0"}
			run := func(stdin string, args ...string) string {
				t.Helper()
				out, errOut, err := starterIn(t, stdin, append(append([]string{"log"}, args...), flags...)...)
				if err != nil {
					t.Fatalf("log %s: %v\n%s%s", args[0], err, out, errOut)
				}
				return out
			}
			run("", "create", "--id", "sf", "--cwd", "/work/project")
			run(jsonLines(t, concat(completedTurn(0, 1), interruptedTurn(6, 2))), "append", "--id", "sf")
			if _, err := os.Stat(logPath(root, "sf", 0, comp)); err != nil {
				t.Fatalf("sessionflow did not write the v0 generation: %v", err)
			}

			rs := runHarness(t, root, comp,
				op{"op": "list"},
				op{"op": "load", "id": "sf"},
				op{"op": "resume", "id": "sf", "append": [][]any{{"turn/start", map[string]any{"turn": 3}}}},
				op{"op": "readFrom", "id": "sf", "fromSeq": 0},
				op{"op": "create", "meta": meta("h")},
				op{"op": "append", "id": "h", "events": concat(completedTurn(0, 1), interruptedTurn(6, 2))},
			)
			var listed []map[string]any
			if err := json.Unmarshal(mustOK(t, "list", rs[0]), &listed); err != nil || len(listed) != 1 || listed[0]["id"] != "sf" {
				t.Fatalf("the harness lists %s (%v), want sessionflow's session", rs[0].OK, err)
			}
			_, loaded := harnessEvents(t, mustOK(t, "load", rs[1]))
			if n := len(loaded); n != 15 {
				t.Fatalf("the harness loads %d events, want the 11 written and 4 closers", n)
			}
			mustOK(t, "resume", rs[2])
			_, want := harnessEvents(t, mustOK(t, "readFrom", rs[3]))
			mustOK(t, "create h", rs[4])
			mustOK(t, "append h", rs[5])

			st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.Compression(comp), Format: jsonl.FormatV0})
			if err != nil {
				t.Fatal(err)
			}
			h, got := readAll(t, st, "sf")
			equalJSON(t, "events of sf after the harness's load and resume", asJSON(t, got), want)
			if h.Header().Version != wire.FormatVersionV0 {
				t.Fatalf("sf: version %d", h.Header().Version)
			}

			// sessionflow resumes the harness's interrupted session in place.
			out := run("", "repair", "--id", "h")
			if !strings.Contains(out, "turn/end") {
				t.Fatalf("repair h: %s", out)
			}
			for _, id := range []string{"sf", "h"} {
				if _, err := os.Stat(logPath(root, id, 3, comp)); !os.IsNotExist(err) {
					t.Fatalf("%s: a v3 generation in a v0 root: %v", id, err)
				}
			}
			rs = runHarness(t, root, comp, op{"op": "load", "id": "h"}, op{"op": "readFrom", "id": "h", "fromSeq": 0})
			_, afterLoad := harnessEvents(t, mustOK(t, "load h", rs[0]))
			_, stored := harnessEvents(t, mustOK(t, "readFrom h", rs[1]))
			_, got = readAll(t, st, "h")
			equalJSON(t, "h as the harness stores it after sessionflow's repair", asJSON(t, got), stored)
			equalJSON(t, "h as the harness loads it after sessionflow's repair", afterLoad, stored)
			if last := got[len(got)-1]; last.Type != wire.TypeEndSeed {
				t.Fatalf("sessionflow's repair did not store the end-seed marker: %+v", last)
			}
		})
	}
}

// TestHarnessAndSessionflowErrorTexts: the two refuse a duplicate
// materialization and a root of the other encoding with the same texts.
func TestHarnessAndSessionflowErrorTexts(t *testing.T) {
	ctx := context.Background()
	for _, comp := range encodings {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.Compression(comp), Format: jsonl.FormatV0})
			if err != nil {
				t.Fatal(err)
			}
			// sessionflow creates "dup" (nothing on disk yet); the harness
			// creates and writes it first; then each side's write of its own
			// first batch is refused with the same text.
			hd, err := st.Create(ctx, wire.Header{ID: "dup", CreatedAt: 1767225600001, Cwd: "/work/project"}, jsonl.CreateOptions{HandleID: "creator"})
			if err != nil {
				t.Fatal(err)
			}
			rs := runHarness(t, root, comp,
				op{"op": "create", "meta": meta("dup")},
				op{"op": "append", "id": "dup", "events": completedTurn(0, 1)})
			mustOK(t, "first append", rs[1])
			// Another harness process creating the same id.
			rs = runHarness(t, root, comp,
				op{"op": "create", "meta": meta("dup")},
				op{"op": "append", "id": "dup", "events": completedTurn(0, 1)})
			harnessText := rs[1].Error
			if harnessText == "" {
				t.Fatalf("the harness's second create of dup was not refused: %s", rs[1].OK)
			}
			// The harness opens an existing id at create; its batch starting
			// at seq 0 is refused as sessionflow refuses it.
			hw, err := st.Open(ctx, "dup", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "writer"})
			if err == nil {
				t.Fatalf("a write open of dup beside the pending creator succeeded")
			}
			_ = hw
			err = hd.Flush(ctx)
			if !errors.Is(err, wire.ErrAlreadyExists) {
				t.Fatalf("sessionflow's materialization over the harness's log: %v", err)
			}
			sessionflowRace := err.Error()
			if err := hd.Close(ctx); err != nil {
				t.Fatal(err)
			}
			hw, err = st.Open(ctx, "dup", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "writer"})
			if err != nil {
				t.Fatal(err)
			}
			err = hw.Append(ctx, []session.Event{{Type: "turn/start", Seq: 0, Time: 1, Data: json.RawMessage(`{"turn":1}`)}})
			if err == nil || err.Error() != harnessText {
				t.Fatalf("duplicate-create texts differ:\nsessionflow: %v\nharness:     %s", err, harnessText)
			}
			if err := hw.Close(ctx); err != nil {
				t.Fatal(err)
			}

			// The materialization race the other way round: the harness
			// creates "race" (nothing on disk yet), sessionflow writes it,
			// then the harness's first batch is refused with sessionflow's
			// text.
			sync := t.TempDir()
			ready, resume := filepath.Join(sync, "ready"), filepath.Join(sync, "resume")
			wait := startHarness(t, root, comp,
				op{"op": "create", "meta": meta("race")},
				op{"op": "signal", "path": ready},
				op{"op": "await", "path": resume},
				op{"op": "append", "id": "race", "events": completedTurn(0, 1)})
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the harness never created race")
				}
			}
			hr, err := st.Create(ctx, wire.Header{ID: "race", CreatedAt: 1767225600001, Cwd: "/work/project"}, jsonl.CreateOptions{HandleID: "racer"})
			if err != nil {
				t.Fatal(err)
			}
			if err := hr.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := hr.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(resume, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			rs = wait()
			if want := strings.ReplaceAll(sessionflowRace, `"dup"`, `"race"`); rs[3].Error != want {
				t.Fatalf("materialization-race texts differ:\nsessionflow: %s\nharness:     %s", want, rs[3].Error)
			}

			// The other encoding over this root.
			other := map[string]string{"none": "zstd", "zstd": "none"}[comp]
			rs = runHarness(t, root, other, op{"op": "list"})
			harnessText = rs[0].Error
			if harnessText == "" {
				t.Fatalf("the harness in %s lists a %s root: %s", other, comp, rs[0].OK)
			}
			st2, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.Compression(other)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = st2.List(ctx)
			if err == nil || err.Error() != harnessText {
				t.Fatalf("wrong-encoding texts differ:\nsessionflow: %v\nharness:     %s", err, harnessText)
			}
		})
	}
}
