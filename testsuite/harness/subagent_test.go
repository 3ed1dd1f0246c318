package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/jsonl"
)

// TestSubagentSnapshotsResumeWithTheirLineage: the delegated children of
// the harness's subagent snapshots (header origin "subagent",
// delegationDepth 1 or 2, parentSession; seedLength for the fork-in-process
// child), restored by the package, are resumed and continued for one turn
// through the workflows on a v3 root and in place on a v0 root: on v3 the
// header keeps their lineage (isSeeded for the fork child, its inherited
// count the harness's seedLength); on v0 the package loads the continued
// log with the very header the harness wrote.
func TestSubagentSnapshotsResumeWithTheirLineage(t *testing.T) {
	var rels []string
	err := filepath.WalkDir(corpusDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(path, "subagent") || !strings.HasSuffix(path, ".jsonl") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		first, _, _ := strings.Cut(string(b), "\n")
		if strings.Contains(first, `"origin":"subagent"`) {
			rel, err := filepath.Rel(corpusDir, path)
			if err != nil {
				return err
			}
			rels = append(rels, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rels) < 15 {
		t.Fatalf("found %d delegated children in the corpus, want the subagent snapshots' (at least 15)", len(rels))
	}
	dir := t.TempDir()
	var logs []map[string]string
	for _, rel := range rels {
		abs, err := filepath.Abs(filepath.Join(corpusDir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, map[string]string{"rel": rel, "path": abs})
	}
	var restored []restoredLog
	runScript(t, "restore.mjs", map[string]any{"cwd": corpusCwd, "outDir": filepath.Join(dir, "restored"), "compressions": []string{"none"}, "logs": logs}, &restored)
	var children []restoredLog
	var inputs []judgeInput
	for _, r := range restored {
		if r.Events == 0 || !r.Loaded {
			continue // TestDifferentialHarness accounts for them
		}
		children = append(children, r)
		inputs = append(inputs, judgeInput{Root: copyOf(t, r.Root, ""), Compression: "none", ID: r.ID})
	}
	pristine := judgeAll(t, inputs)
	depths := map[float64]int{}
	seeded := 0
	keep := t.TempDir()
	var again []judgeInput
	for i, r := range children {
		pv := pristine[i]
		if !pv.Accepted {
			t.Fatalf("%s: the package refuses a copy of the restored log: %s", r.Rel, pv.Error)
		}
		var meta map[string]any
		if err := json.Unmarshal(pv.Meta, &meta); err != nil {
			t.Fatal(err)
		}
		if meta["origin"] != "subagent" || meta["parentSession"] == nil {
			t.Fatalf("%s: the package loads the lineage %s", r.Rel, pv.Meta)
		}
		depths[meta["delegationDepth"].(float64)]++
		all := plainJSON(t, pv.Events)
		stored, closers := all[:r.Events], all[r.Events:]
		t.Run(r.Rel+"/v3", func(t *testing.T) {
			c := continueOn(t, r, jsonl.FormatV3, meta, stored, closers, "")
			st, err := jsonl.NewStore(jsonl.Options{Root: c.root, Compression: jsonl.CompressionNone})
			if err != nil {
				t.Fatal(err)
			}
			h, _ := readAll(t, st, r.ID)
			hdr := h.Header()
			if hdr.Origin != "subagent" || float64(hdr.DelegationDepth) != meta["delegationDepth"] || hdr.ParentSession != meta["parentSession"] {
				t.Fatalf("the resumed header %+v lost the lineage %s", hdr, pv.Meta)
			}
			_, isFork := meta["seedLength"]
			if hdr.IsSeeded != isFork {
				t.Fatalf("isSeeded %t, the harness's header %s", hdr.IsSeeded, pv.Meta)
			}
			if isFork {
				seeded++
			}
		})
		t.Run(r.Rel+"/v0", func(t *testing.T) {
			c := continueOn(t, r, jsonl.FormatV0, meta, stored, closers, keep)
			again = append(again, judgeInput{Root: c.root, Compression: "none", ID: r.ID})
		})
	}
	if len(again) != len(children) {
		t.Fatalf("%d of %d children continued on v0", len(again), len(children))
	}
	verdicts := judgeAll(t, again)
	for i, v := range verdicts {
		if !v.Accepted {
			t.Fatalf("%s: the package's load of the continued log: %s", children[i].Rel, v.Error)
		}
		var got, want map[string]any
		if err := json.Unmarshal(v.Meta, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(pristine[i].Meta, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the continued log's header %s, the harness wrote %s", children[i].Rel, v.Meta, pristine[i].Meta)
		}
	}
	if depths[1] == 0 || depths[2] == 0 || seeded == 0 {
		t.Fatalf("children by depth %v, %d forks: want depths 1 and 2 and a fork child", depths, seeded)
	}
	t.Logf("%d delegated children resumed and continued (by depth %v, %d fork children)", len(children), depths, seeded)
}

// subagentVerdict is subagent.mjs's reading of one session.
type subagentVerdict struct {
	Meta       map[string]any  `json:"meta"`
	Descriptor json.RawMessage `json:"descriptor"`
	Seeded     []struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	} `json:"seeded"`
	Error string `json:"error"`
}

// TestSubagentDescriptorsReadAsThePackageFoldsThem: for every delegated
// child of the harness's snapshots, the subagent/descriptor sessionflow
// reads from the log (the first one, as the package folds it) is the one
// @deepseek-ai/dsh-subagent's foldSubagentDescriptor returns, of version 2
// with its mode and provider; and the package's own writer of the event
// (seedDescriptorTurn) stores exactly that data, so a child log sessionflow
// writes with that event is one the harness identifies the same way.
func TestSubagentDescriptorsReadAsThePackageFoldsThem(t *testing.T) {
	var logs []map[string]string
	err := filepath.WalkDir(corpusDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if first, _, _ := strings.Cut(string(b), "\n"); strings.Contains(first, `"origin":"subagent"`) {
			rel, _ := filepath.Rel(corpusDir, path)
			abs, err := filepath.Abs(path)
			if err != nil {
				return err
			}
			logs = append(logs, map[string]string{"rel": filepath.ToSlash(rel), "path": abs})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var restored []restoredLog
	runScript(t, "restore.mjs", map[string]any{"cwd": corpusCwd, "outDir": t.TempDir(), "compressions": []string{"none"}, "logs": logs}, &restored)
	var sessions []map[string]string
	var children []restoredLog
	for _, r := range restored {
		if r.Events > 0 && r.Loaded {
			children = append(children, r)
			sessions = append(sessions, map[string]string{"root": copyOf(t, r.Root, ""), "compression": "none", "id": r.ID})
		}
	}
	var verdicts []subagentVerdict
	runScript(t, "subagent.mjs", map[string]any{"sessions": sessions}, &verdicts)
	if len(verdicts) != len(children) {
		t.Fatalf("subagent.mjs judged %d of %d sessions", len(verdicts), len(children))
	}
	withDescriptor := 0
	for i, r := range children {
		v := verdicts[i]
		if v.Error != "" {
			t.Fatalf("%s: the package: %s", r.Rel, v.Error)
		}
		_, events := readAll(t, openStore(t, r.Root, "none"), r.ID)
		var ours json.RawMessage
		for _, e := range events {
			if e.Type == "subagent/descriptor" {
				ours = json.RawMessage(e.Data)
				break
			}
		}
		if string(v.Descriptor) == "null" {
			if ours != nil {
				t.Fatalf("%s: sessionflow reads the descriptor %s, the package none", r.Rel, ours)
			}
			continue
		}
		withDescriptor++
		var got, want map[string]any
		if err := json.Unmarshal(ours, &got); err != nil {
			t.Fatalf("%s: sessionflow's descriptor %s: %v", r.Rel, ours, err)
		}
		if err := json.Unmarshal(v.Descriptor, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || want["version"] != float64(2) || want["mode"] == nil || want["provider"] == nil {
			t.Fatalf("%s: sessionflow reads the descriptor %s, the package folds %s", r.Rel, ours, v.Descriptor)
		}
		if len(v.Seeded) != 1 || v.Seeded[0].Type != "subagent/descriptor" {
			t.Fatalf("%s: seedDescriptorTurn wrote %+v", r.Rel, v.Seeded)
		}
		var seeded map[string]any
		if err := json.Unmarshal(v.Seeded[0].Data, &seeded); err != nil || !reflect.DeepEqual(seeded, want) {
			t.Fatalf("%s: seedDescriptorTurn stores %s for the descriptor %s", r.Rel, v.Seeded[0].Data, v.Descriptor)
		}
	}
	if withDescriptor < 15 {
		t.Fatalf("%d children carry a descriptor, want the one-shot snapshots' (at least 15)", withDescriptor)
	}
}
