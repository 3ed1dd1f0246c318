package session

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/sessionflow/sessionflow/wire"
)

// Packed chunk rows (docs/FORMAT.md §1.6): a run of assistant/chunk delta
// events of one block is stored as one line, a storage row, which a read
// expands back into exactly the events it stands for. The rows are those of
// the published harness (@deepseek-ai/dsh-session, lib/types/chunk-rows.js:
// packChunkRuns and decodeStorageRecord); their tags have no slash, so they
// are never mistaken for event types.
const (
	// RowTextChunks packs text-delta chunks.
	RowTextChunks = "text-chunks"
	// RowReasoningChunks packs reasoning-delta chunks.
	RowReasoningChunks = "reasoning-chunks"
	// RowToolCallChunks packs tool-call-delta chunks of one call.
	RowToolCallChunks = "tool-call-chunks"
)

// minChunkRun is the shortest run that is packed; shorter runs stay one
// event per line. It is a format constant of the harness: both layouts read
// the same, so it never invalidates a stored log.
const minChunkRun = 3

// IsChunkRowType reports whether typ is the tag of a packed chunk row.
func IsChunkRowType(typ string) bool {
	return typ == RowTextChunks || typ == RowReasoningChunks || typ == RowToolCallChunks
}

// ErrMalformedChunkRow marks a row-tagged line that is not a valid packed
// row: corrupt storage, never an event (a read that took it for one would
// drop a whole run).
var ErrMalformedChunkRow = errors.New("malformed chunk storage row")

// chunkRow is a decoded packed row. Numbers keep their stored spelling, so
// the expanded events are byte for byte the events that were packed.
type chunkRow struct {
	tag         string
	seq0, time0 int64
	turn, step  []byte
	index       []byte
	id, name    []byte // tool-call rows; name is nil when absent
	dt          []int64
	members     [][]byte // canonical JSON strings
}

// decodeChunkRow decodes a canonical row line from its top-level members
// and returns it as an Event whose Type is the row's tag, Seq its seq0, Time
// its time0 and Data the row's data; ExpandChunkRow turns it into the
// events. The rules are the harness's validateRow.
func decodeChunkRow(canon []byte, members []member, tag string) (Event, error) {
	if members == nil {
		members = splitCanonicalObject(canon)
	}
	vals := map[string][]byte{}
	for _, m := range members {
		vals[string(canon[m.keyStart+1:m.keyEnd-1])] = canon[m.start:m.end:m.end]
	}
	if !exactKeys(vals, "type", "seq0", "time0", "data") {
		return Event{Type: tag}, rowError(tag, "envelope must be exactly {type, seq0, time0, data}")
	}
	seq0, err := ParseSafeInt(vals["seq0"])
	if err != nil {
		return Event{Type: tag}, rowError(tag, "seq0 must be a non-negative safe integer")
	}
	time0, err := parseSafeIntSigned(vals["time0"])
	if err != nil {
		return Event{Type: tag}, rowError(tag, "time0 must be a safe integer")
	}
	data := vals["data"]
	if data[0] != '{' {
		return Event{Type: tag}, rowError(tag, "data must be an object")
	}
	ev := Event{Type: tag, Seq: seq0, Time: time0, Data: data}
	if _, err := parseChunkRow(ev); err != nil {
		return Event{Type: tag}, err
	}
	return ev, nil
}

// parseChunkRow decodes and checks the data of a row event (decodeChunkRow).
func parseChunkRow(ev Event) (*chunkRow, error) {
	tag := ev.Type
	r := &chunkRow{tag: tag, seq0: ev.Seq, time0: ev.Time}
	vals := map[string][]byte{}
	for _, m := range splitCanonicalObject(ev.Data) {
		vals[string(ev.Data[m.keyStart+1:m.keyEnd-1])] = ev.Data[m.start:m.end:m.end]
	}
	payloadKey := "texts"
	if tag == RowToolCallChunks {
		payloadKey = "args"
		withName := exactKeys(vals, "turn", "step", "index", "id", "name", "dt", "args")
		if !withName && !exactKeys(vals, "turn", "step", "index", "id", "dt", "args") {
			return nil, rowError(tag, "data must be exactly {turn, step, index, id, name?, dt, args}")
		}
		r.id = vals["id"]
		if withName {
			r.name = vals["name"]
		}
		if r.id[0] != '"' || (withName && r.name[0] != '"') {
			return nil, rowError(tag, "id (and name when present) must be strings")
		}
	} else if !exactKeys(vals, "turn", "step", "index", "dt", "texts") {
		return nil, rowError(tag, "data must be exactly {turn, step, index, dt, texts}")
	}
	r.turn, r.step, r.index = vals["turn"], vals["step"], vals["index"]
	if !isNumber(r.turn) || !isNumber(r.step) || !isNumber(r.index) {
		return nil, rowError(tag, "turn/step/index must be numbers")
	}
	members, ok := canonicalArray(vals[payloadKey])
	if !ok || len(members) == 0 {
		return nil, rowError(tag, payloadKey+" must be a non-empty string array")
	}
	for _, m := range members {
		if m[0] != '"' {
			return nil, rowError(tag, payloadKey+" must be a non-empty string array")
		}
	}
	r.members = members
	gaps, ok := canonicalArray(vals["dt"])
	if !ok {
		return nil, rowError(tag, "dt must be an array of safe integers")
	}
	for _, g := range gaps {
		n, err := parseSafeIntSigned(g)
		if err != nil {
			return nil, rowError(tag, "dt must be an array of safe integers")
		}
		r.dt = append(r.dt, n)
	}
	if len(r.dt) != len(members)-1 {
		return nil, rowError(tag, fmt.Sprintf("dt length %d does not match %d members", len(r.dt), len(members)))
	}
	if r.seq0+int64(len(members))-1 > wire.MaxSafeInteger {
		return nil, rowError(tag, "member seqs must stay safe integers")
	}
	t := r.time0
	for _, g := range r.dt {
		t += g
		if t > wire.MaxSafeInteger || t < -wire.MaxSafeInteger {
			return nil, rowError(tag, "member times must stay safe integers")
		}
	}
	return r, nil
}

func rowError(tag, why string) error {
	return fmt.Errorf("%w: malformed %s storage row: %s", ErrMalformedChunkRow, tag, why)
}

// exactKeys reports whether vals has exactly the keys given.
func exactKeys(vals map[string][]byte, keys ...string) bool {
	if len(vals) != len(keys) {
		return false
	}
	for _, k := range keys {
		if _, ok := vals[k]; !ok {
			return false
		}
	}
	return true
}

// isNumber reports whether a canonical JSON value is a number.
func isNumber(v []byte) bool {
	return len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9'))
}

// canonicalArray splits a canonical JSON array into its elements.
func canonicalArray(v []byte) ([][]byte, bool) {
	if len(v) < 2 || v[0] != '[' {
		return nil, false
	}
	var out [][]byte
	for i := 1; i < len(v)-1; {
		if v[i] == ',' {
			i++
		}
		end := skipCanonical(v, i)
		out = append(out, v[i:end:end])
		i = end
	}
	return out, true
}

// IsChunkRow reports whether e is a packed chunk row as a read decodes it
// (its Type a row tag): ExpandChunkRow gives the events it stands for.
func IsChunkRow(e Event) bool { return IsChunkRowType(e.Type) }

// ExpandChunkRow returns the assistant/chunk events a packed row stands
// for, in order, numbered from the row's seq0: exactly the events that were
// packed, byte for byte.
func ExpandChunkRow(row Event) ([]Event, error) {
	r, err := parseChunkRow(row)
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(r.members))
	t := r.time0
	for k, m := range r.members {
		if k > 0 {
			t += r.dt[k-1]
		}
		var b bytes.Buffer
		b.Grow(64 + len(m))
		b.WriteString(`{"turn":`)
		b.Write(r.turn)
		b.WriteString(`,"step":`)
		b.Write(r.step)
		b.WriteString(`,"chunk":{"type":"`)
		switch r.tag {
		case RowTextChunks:
			b.WriteString(`text-delta","index":`)
			b.Write(r.index)
			b.WriteString(`,"text":`)
		case RowReasoningChunks:
			b.WriteString(`reasoning-delta","index":`)
			b.Write(r.index)
			b.WriteString(`,"text":`)
		default:
			b.WriteString(`tool-call-delta","index":`)
			b.Write(r.index)
			b.WriteString(`,"id":`)
			b.Write(r.id)
			if r.name != nil {
				b.WriteString(`,"name":`)
				b.Write(r.name)
			}
			b.WriteString(`,"argumentsDelta":`)
		}
		b.Write(m)
		b.WriteString(`}}`)
		out[k] = Event{Type: wire.TypeAssistantChunk, Seq: r.seq0 + int64(k), Time: t, Data: b.Bytes()}
	}
	return out, nil
}

// deltaKind classifies an event for packing, as the harness's classify:
// the row tag of its run when its whole shape is a whitelisted delta chunk
// (exact keys in the order a row expands to, string texts), else "" (stored
// as it is). key identifies the
// block a run continues: turn, step, index and, for a tool call, its id and
// name.
func deltaKind(e Event) (tag, key string) {
	if e.Type != wire.TypeAssistantChunk || e.SurfaceOp != nil || e.SourceEventSeqs != nil || e.Ignorable {
		return "", ""
	}
	data := memberMap(e.Data)
	if !inOrder(e.Data, "turn", "step", "chunk") || !isNumber(data["turn"]) || !isNumber(data["step"]) {
		return "", ""
	}
	chunk := data["chunk"]
	if len(chunk) == 0 || chunk[0] != '{' {
		return "", ""
	}
	c := memberMap(chunk)
	if !isNumber(c["index"]) {
		return "", ""
	}
	isString := func(k string) bool { v := c[k]; return len(v) > 0 && v[0] == '"' }
	block := string(data["turn"]) + "," + string(data["step"]) + "," + string(c["index"])
	switch string(c["type"]) {
	case `"text-delta"`:
		if inOrder(chunk, "type", "index", "text") && isString("text") {
			return RowTextChunks, block
		}
	case `"reasoning-delta"`:
		if inOrder(chunk, "type", "index", "text") && isString("text") {
			return RowReasoningChunks, block
		}
	case `"tool-call-delta"`:
		named := inOrder(chunk, "type", "index", "id", "name", "argumentsDelta") && isString("name")
		if (named || inOrder(chunk, "type", "index", "id", "argumentsDelta")) && isString("id") && isString("argumentsDelta") {
			name := "-"
			if named {
				name = "+" + string(c["name"])
			}
			return RowToolCallChunks, block + "," + string(c["id"]) + "," + name
		}
	}
	return "", ""
}

// inOrder reports whether the canonical JSON object obj has exactly the
// keys given, in that order. The packer requires the order a row expands
// to, so that a packed event reads back byte for byte (the harness's packer
// checks only the key set; both layouts read the same).
func inOrder(obj []byte, keys ...string) bool {
	if len(obj) == 0 || obj[0] != '{' {
		return false
	}
	members := splitCanonicalObject(obj)
	if len(members) != len(keys) {
		return false
	}
	for i, m := range members {
		if string(obj[m.keyStart+1:m.keyEnd-1]) != keys[i] {
			return false
		}
	}
	return true
}

// memberMap maps the keys of a canonical JSON object to their values.
func memberMap(obj []byte) map[string][]byte {
	out := map[string][]byte{}
	if len(obj) == 0 || obj[0] != '{' {
		return out
	}
	for _, m := range splitCanonicalObject(obj) {
		out[string(obj[m.keyStart+1:m.keyEnd-1])] = obj[m.start:m.end:m.end]
	}
	return out
}

// AppendPackedLines appends the storage lines of a batch to dst, each
// newline-terminated, as the harness's packChunkRuns lays them out: every
// run of at least three consecutive delta chunks of one block (contiguous
// seqs, same turn, step and index, and for tool calls the same id and name)
// becomes one packed row; every other event is its own line
// (Event.MarshalJSON). Events must be valid and in canonical form.
func AppendPackedLines(dst []byte, batch []Event) ([]byte, error) {
	var (
		runTag, runKey string
		run            []Event
	)
	flush := func() error {
		if len(run) >= minChunkRun {
			dst = appendRow(dst, runTag, run)
		} else {
			for _, e := range run {
				b, err := e.MarshalJSON()
				if err != nil {
					return err
				}
				dst = append(append(dst, b...), '\n')
			}
		}
		run, runTag, runKey = run[:0], "", ""
		return nil
	}
	for _, e := range batch {
		tag, key := deltaKind(e)
		if tag != "" && tag == runTag && key == runKey && len(run) > 0 && continuesRun(run[len(run)-1], e) {
			run = append(run, e)
			continue
		}
		if err := flush(); err != nil {
			return nil, err
		}
		if tag == "" {
			b, err := e.MarshalJSON()
			if err != nil {
				return nil, err
			}
			dst = append(append(dst, b...), '\n')
			continue
		}
		runTag, runKey, run = tag, key, append(run, e)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return dst, nil
}

// continuesRun reports whether next extends a run ending in prev: the next
// seq, and a time gap that is itself a safe integer.
func continuesRun(prev, next Event) bool {
	gap := next.Time - prev.Time
	return next.Seq == prev.Seq+1 && gap <= wire.MaxSafeInteger && gap >= -wire.MaxSafeInteger
}

// appendRow appends the packed row of run (at least minChunkRun delta
// events that deltaKind put in one run) as one line.
func appendRow(dst []byte, tag string, run []Event) []byte {
	first := memberMap(run[0].Data)
	chunk := memberMap(first["chunk"])
	dst = append(dst, `{"type":"`...)
	dst = append(dst, tag...)
	dst = append(dst, `","seq0":`...)
	dst = strconv.AppendInt(dst, run[0].Seq, 10)
	dst = append(dst, `,"time0":`...)
	dst = strconv.AppendInt(dst, run[0].Time, 10)
	dst = append(dst, `,"data":{"turn":`...)
	dst = append(dst, first["turn"]...)
	dst = append(dst, `,"step":`...)
	dst = append(dst, first["step"]...)
	dst = append(dst, `,"index":`...)
	dst = append(dst, chunk["index"]...)
	dst = append(dst, `,"dt":[`...)
	for i := 1; i < len(run); i++ {
		if i > 1 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, run[i].Time-run[i-1].Time, 10)
	}
	dst = append(dst, ']')
	payload := "text"
	if tag == RowToolCallChunks {
		payload = "argumentsDelta"
		dst = append(dst, `,"id":`...)
		dst = append(dst, chunk["id"]...)
		if name, ok := chunk["name"]; ok {
			dst = append(dst, `,"name":`...)
			dst = append(dst, name...)
		}
		dst = append(dst, `,"args":[`...)
	} else {
		dst = append(dst, `,"texts":[`...)
	}
	for i, e := range run {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, memberMap(memberMap(e.Data)["chunk"])[payload]...)
	}
	return append(dst, "]}}\n"...)
}
