package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
)

// plaintext is the mutant's log as raw JSONL.
func (mu mutant) plaintext() []byte {
	var b bytes.Buffer
	for _, l := range mu.lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	b.Write(mu.tail)
	return b.Bytes()
}

// compression is the encoding of the mutant's root.
func (mu mutant) compression() string {
	if mu.zstd {
		return "zstd"
	}
	return "none"
}

// writeMutant writes a mutant as the only log of a new root under dir, as
// the backend lays it out (a zstd one with its plaintext beside the root; a
// raw log is its own plaintext); it returns the judge input.
func writeMutant(enc *zstd.Encoder, dir string, i int, mu mutant) (judgeInput, error) {
	root := filepath.Join(dir, fmt.Sprintf("m%05d", i))
	project := "_no-cwd"
	if mu.cwd != "" {
		key, err := jsonl.ProjectKey(mu.cwd)
		if err != nil {
			return judgeInput{}, err
		}
		project = key
	}
	seg, err := jsonl.EncodeSegment(mu.id)
	if err != nil {
		return judgeInput{}, err
	}
	sdir := filepath.Join(root, project, seg)
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		return judgeInput{}, err
	}
	plain := mu.plaintext()
	name, body := "session.jsonl", plain
	plainPath := filepath.Join(sdir, name)
	if mu.zstd {
		name, body = "session.jsonl.zstd", zstdLog(enc, mu)
		plainPath = root + ".plain"
		if err := os.WriteFile(plainPath, plain, 0o644); err != nil {
			return judgeInput{}, err
		}
	}
	if err := os.WriteFile(filepath.Join(sdir, name), body, 0o644); err != nil {
		return judgeInput{}, err
	}
	return judgeInput{Root: root, Compression: mu.compression(), ID: mu.id, Plain: plainPath}, nil
}

// zstdLog encodes a mutant as the backend frames a log: the header line in
// a frame of its own, then the event lines in two batches. A tail (a torn
// fragment) goes in the last batch, whose frame is then cut in half: a write
// torn by a crash.
func zstdLog(enc *zstd.Encoder, mu mutant) []byte {
	frame := func(lines [][]byte, tail []byte) []byte {
		var b bytes.Buffer
		for _, l := range lines {
			b.Write(l)
			b.WriteByte('\n')
		}
		b.Write(tail)
		return enc.EncodeAll(b.Bytes(), nil)
	}
	out := frame(mu.lines[:1], nil)
	events := mu.lines[1:]
	if len(events) == 0 && len(mu.tail) == 0 {
		return out
	}
	split := max(len(events)-1, 0)
	if split > 0 {
		out = append(out, frame(events[:split], nil)...)
	}
	last := frame(events[split:], mu.tail)
	if len(mu.tail) > 0 {
		last = last[:len(last)/2]
	}
	return append(out, last...)
}

// eventsFromPackage turns the events the package loaded into sessionflow
// events, for the checks of sessionflow's fold and shape checks on logs the
// package accepts.
func eventsFromPackage(raw []json.RawMessage) ([]session.Event, error) {
	out := make([]session.Event, 0, len(raw))
	for i, r := range raw {
		var w struct {
			Type            string          `json:"type"`
			Seq             int64           `json:"seq"`
			Time            int64           `json:"time"`
			Data            json.RawMessage `json:"data"`
			SurfaceOp       json.RawMessage `json:"surfaceOp"`
			SourceEventSeqs []int64         `json:"sourceEventSeqs"`
			Ignorable       bool            `json:"ignorable"`
		}
		if err := json.Unmarshal(r, &w); err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		// The data as the package gives it (JSON.stringify's output), not
		// canonicalized: it may nest deeper than sessionflow's lossless rule
		// allows, which the fold and the checks do not care about.
		e := session.Event{Type: w.Type, Seq: w.Seq, Time: w.Time, Data: w.Data, SourceEventSeqs: w.SourceEventSeqs, Ignorable: w.Ignorable}
		switch {
		case len(w.SurfaceOp) == 0:
		case string(w.SurfaceOp) == `"append"`:
			e.SurfaceOp = session.AppendOp()
		default:
			var op struct {
				Op         string `json:"op"`
				Start, End int64
			}
			if err := json.Unmarshal(w.SurfaceOp, &op); err != nil {
				return nil, fmt.Errorf("event %d: surfaceOp: %w", i, err)
			}
			e.SurfaceOp = &session.SurfaceOp{Op: op.Op, StartSeq: op.Start, EndSeq: op.End}
		}
		out = append(out, e)
	}
	return out, nil
}
