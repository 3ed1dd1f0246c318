package harness

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
)

var encodings = []string{"none", "zstd"}

// openStore opens a sessionflow store over root in an encoding.
func openStore(t *testing.T, root, compression string) *jsonl.Store {
	t.Helper()
	c, err := jsonl.ParseCompression(compression)
	if err != nil {
		t.Fatal(err)
	}
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: c})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// readAll reads a session through a sessionflow read handle.
func readAll(t *testing.T, st *jsonl.Store, id string) (*jsonl.Handle, []session.Event) {
	t.Helper()
	ctx := context.Background()
	h, err := st.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	if err != nil {
		t.Fatalf("open %q for reading: %v", id, err)
	}
	t.Cleanup(func() { _ = h.Close(ctx) })
	events, err := h.Read(ctx, 0, -1)
	if err != nil {
		t.Fatalf("read %q: %v", id, err)
	}
	return h, events
}

// asJSON turns sessionflow events into plain JSON values for comparison
// with what the harness returns.
func asJSON(t *testing.T, events []session.Event) []any {
	t.Helper()
	out := make([]any, 0, len(events))
	for _, e := range events {
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// harnessEvents decodes the events of a harness load/inspect/readFrom.
func harnessEvents(t *testing.T, raw json.RawMessage) (map[string]any, []any) {
	t.Helper()
	var v struct {
		Meta   map[string]any `json:"meta"`
		Events []any          `json:"events"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode harness events %s: %v", raw, err)
	}
	return v.Meta, v.Events
}

func equalJSON(t *testing.T, what string, got, want []any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("%s differ:\nsessionflow: %s\nharness:     %s", what, g, w)
	}
}

// TestSessionflowReadsHarnessLogs: sessions the published harness wrote
// (format v0) are listed, stated, inspected and read by sessionflow with the
// events the harness itself reads from them, in both encodings.
func TestSessionflowReadsHarnessLogs(t *testing.T) {
	for _, comp := range encodings {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			harnessSessions(t, root, comp)
			ids := []string{"done", "fork", "open", "torn"}
			ops := []op{{"op": "list"}}
			for _, id := range ids {
				ops = append(ops, op{"op": "readFrom", "id": id, "fromSeq": 0})
			}
			rs := runHarness(t, root, comp, ops...)
			var listed []map[string]any
			if err := json.Unmarshal(mustOK(t, "list", rs[0]), &listed); err != nil {
				t.Fatal(err)
			}
			if len(listed) != len(ids) {
				t.Fatalf("the harness lists %d sessions, want %d", len(listed), len(ids))
			}

			st := openStore(t, root, comp)
			ctx := context.Background()
			snaps, err := st.List(ctx)
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			if len(snaps) != len(ids) {
				t.Fatalf("sessionflow lists %d sessions, want %d: %+v", len(snaps), len(ids), snaps)
			}
			for i, s := range snaps {
				if s.Header.ID != ids[i] || s.Header.Version != 0 {
					t.Fatalf("list entry %d: id %q version %d, want %q version 0", i, s.Header.ID, s.Header.Version, ids[i])
				}
			}
			for i, id := range ids {
				meta, want := harnessEvents(t, mustOK(t, "readFrom "+id, rs[i+1]))
				h, got := readAll(t, st, id)
				equalJSON(t, "events of "+id, asJSON(t, got), want)
				if h.Header().Version != 0 {
					t.Fatalf("%s: header version %d, want 0", id, h.Header().Version)
				}
				seed, seeded := meta["seedLength"].(float64)
				if h.Header().IsSeeded != seeded || h.InheritedEventCount() != int64(seed) {
					t.Fatalf("%s: seeded %t inherited %d, the harness's header has seedLength %v",
						id, h.Header().IsSeeded, h.InheritedEventCount(), meta["seedLength"])
				}
				snap, err := st.Stat(ctx, id)
				if err != nil || snap == nil || snap.Header.Version != 0 {
					t.Fatalf("stat %s: %+v, %v", id, snap, err)
				}
			}
			if seed, _ := harnessMeta(t, listed, "fork")["seedLength"].(float64); seed == 0 {
				t.Fatalf("the fixture's fork has no seedLength: %v", harnessMeta(t, listed, "fork"))
			}
			in, err := st.Inspect(ctx, "torn")
			if err != nil {
				t.Fatal(err)
			}
			if in.TornBytes == 0 {
				t.Fatalf("inspect torn: no torn tail reported: %+v", in)
			}

			// The CLI shows the format version.
			out, errOut, err := starter(t, "log", "list", "--json", "--root", root, "--compression", comp)
			if err != nil {
				t.Fatalf("log list: %v\n%s", err, errOut)
			}
			rows := listRows[map[string]any](t, out)
			if len(rows) != len(ids) {
				t.Fatalf("log list shows %d rows, want %d: %s", len(rows), len(ids), out)
			}
			for _, r := range rows {
				if r["formatVersion"] != float64(0) {
					t.Fatalf("log list row without formatVersion 0: %v", r)
				}
			}
			out, errOut, err = starter(t, "log", "inspect", "--json", "--id", "fork", "--root", root, "--compression", comp)
			if err != nil {
				t.Fatalf("log inspect: %v\n%s", err, errOut)
			}
			var rep map[string]any
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if rep["formatVersion"] != float64(0) || rep["inheritedEventCount"] != harnessMeta(t, listed, "fork")["seedLength"] {
				t.Fatalf("log inspect fork: formatVersion %v inheritedEventCount %v", rep["formatVersion"], rep["inheritedEventCount"])
			}
			out, errOut, err = starter(t, "log", "inspect", "--id", "done", "--root", root, "--compression", comp)
			if err != nil || !strings.Contains(out, "format:          v0 (") {
				t.Fatalf("log inspect (text) does not name format v0: %v\n%s%s", err, out, errOut)
			}
			out, errOut, err = starter(t, "log", "cat", "--id", "fork", "--root", root, "--compression", comp)
			if err != nil {
				t.Fatalf("log cat: %v\n%s", err, errOut)
			}
			first, _, _ := strings.Cut(out, "\n")
			if want := `{"type":"session","version":0,"id":"fork","createdAt":`; !strings.HasPrefix(first, want) || !strings.Contains(first, `"parentSession":"done","seedLength":`) {
				t.Fatalf("log cat header line %s, want the v0 header", first)
			}
			if comp == "none" {
				raw, err := os.ReadFile(logPath(root, "fork", 0, comp))
				if err != nil {
					t.Fatal(err)
				}
				if fileFirst, _, _ := strings.Cut(string(raw), "\n"); fileFirst != first {
					t.Fatalf("log cat prints the header line\n%s\nthe file holds\n%s", first, fileFirst)
				}
			}
		})
	}
}

func harnessMeta(t *testing.T, listed []map[string]any, id string) map[string]any {
	t.Helper()
	for _, m := range listed {
		if m["id"] == id {
			return m
		}
	}
	t.Fatalf("the harness does not list %q", id)
	return nil
}
