package jsonl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Era A logs (FORMAT.md §8.3) are flat files <dir>/<project>/<id>.jsonl
// of the older path API: a version 1 header {type, version, id, createdAt,
// cwd?, parentSession?} and a committed region that ends at the last
// turn/end. The runtime refuses a root holding one (FORMAT.md §3.5); they can only
// be imported into a store from a separate directory.

// FindEraALogs lists the Era A flat logs under dir: every *.jsonl file
// directly inside a project directory of dir (_no-cwd or cwd-<hex>), sorted.
func FindEraALogs(dir string) ([]string, error) {
	projects, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range projects {
		if !p.IsDir() || (p.Name() != noCwdDir && !strings.HasPrefix(p.Name(), "cwd-")) {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(dir, p.Name()))
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".jsonl") {
				out = append(out, filepath.Join(dir, p.Name(), e.Name()))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// ImportEraA writes the Era A flat log at path into this store as a new
// session in the store's format: its committed region (up to the last
// turn/end; the crash tail after it is left behind), with a header keeping
// id, createdAt, cwd and parentSession. The source file is only read. A
// session with the same id already in the store is ErrAlreadyExists.
func (s *Store) ImportEraA(ctx context.Context, path string, opts MigrateOptions) (*MigrationResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h, events, committed, err := scanEraA(data)
	if err != nil {
		return nil, &wire.StoreError{Code: CodeCorrupt, Path: path, SessionID: h.ID, Err: err, Message: fmt.Sprintf(
			"era A log %s: %v", path, err)}
	}
	res := &MigrationResult{SessionID: h.ID, From: path, FromVersion: 1, ToVersion: wire.FormatVersion,
		Events: int64(len(events)), DroppedBytes: int64(len(data)) - committed, DryRun: opts.DryRun}
	h = s.rootHeader(h, 0)
	res.ToVersion = h.Version
	unlock, err := s.begin(ctx, h.ID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	dir, err := s.dirFor(h)
	if err != nil {
		return nil, invalidArgument(h.ID, err)
	}
	res.To = filepath.Join(dir, s.generationFor(h))
	if _, found, err := s.locate(h.ID); err != nil {
		return nil, err
	} else if found {
		return nil, alreadyExists(h.ID)
	}
	if opts.DryRun {
		return res, nil
	}
	content, err := s.encodeLog(h, events)
	if err != nil {
		return nil, err
	}
	if err := s.mkdirAll(dir); err != nil {
		return nil, err
	}
	if err := s.publish(dir, s.generationFor(h), content); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, alreadyExists(h.ID)
		}
		return nil, err
	}
	return res, nil
}

// scanEraA validates an Era A log (FORMAT.md §8.3): it returns the
// header, the committed events and the end of the committed region.
func scanEraA(data []byte) (wire.Header, []session.Event, int64, error) {
	var h wire.Header
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return h, nil, 0, errHeaderless
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(data[:nl], &raw) != nil {
		if !json.Valid(data[:nl]) {
			return h, nil, 0, errHeaderNotJSON
		}
		return h, nil, 0, errHeaderShape
	}
	var typ string
	var version float64
	if json.Unmarshal(raw["type"], &typ) != nil || typ != "session" || json.Unmarshal(raw["version"], &version) != nil ||
		json.Unmarshal(raw["id"], &h.ID) != nil || h.ID == "" {
		return h, nil, 0, errHeaderShape
	}
	var createdAt float64
	if json.Unmarshal(raw["createdAt"], &createdAt) != nil || createdAt < 0 || createdAt != math.Trunc(createdAt) || createdAt > wire.MaxSafeInteger {
		return h, nil, 0, errHeaderShape
	}
	if version != 1 {
		return h, nil, 0, fmt.Errorf("unsupported session format version %s for %q (only v1 is supported)", stringifyJSON(raw["version"]), h.ID)
	}
	h.CreatedAt = int64(createdAt)
	for k, dst := range map[string]*string{"cwd": &h.Cwd, "parentSession": &h.ParentSession} {
		if v, ok := raw[k]; ok && json.Unmarshal(v, dst) != nil {
			return h, nil, 0, errHeaderShape
		}
	}
	if err := h.Validate(); err != nil {
		return h, nil, 0, err
	}
	h.Version = wire.FormatVersion
	// The committed region ends at the last turn/end; every line before it
	// must parse and continue the seqs.
	type line struct {
		ev  session.Event
		err error
		end int64
	}
	var lines []line
	var d session.LineDecoder
	for pos := nl + 1; ; {
		i := bytes.IndexByte(data[pos:], '\n')
		if i < 0 {
			break
		}
		ev, err := d.Decode(data[pos : pos+i])
		lines = append(lines, line{ev: ev, err: err, end: int64(pos + i + 1)})
		pos += i + 1
	}
	last := -1
	for i, l := range lines {
		if (l.err == nil || !errors.Is(l.err, session.ErrUnparsable)) && l.ev.Type == wire.TypeTurnEnd {
			last = i
		}
	}
	if last < 0 {
		return h, []session.Event{}, int64(nl + 1), nil
	}
	events := make([]session.Event, 0, last+1)
	for i, l := range lines[:last+1] {
		if errors.Is(l.err, session.ErrUnparsable) {
			return h, nil, 0, fmt.Errorf("corrupt session log: unparsable committed event at line %d", i+1)
		}
		if l.err != nil {
			return h, nil, 0, fmt.Errorf("corrupt session log: invalid committed event at line %d: %w", i+1, l.err)
		}
		if l.ev.Seq != int64(i) {
			return h, nil, 0, fmt.Errorf("corrupt session log: seq gap in committed region at line %d (expected %d, got %d)", i+1, i, l.ev.Seq)
		}
		events = append(events, l.ev)
	}
	return h, events, lines[last].end, nil
}
