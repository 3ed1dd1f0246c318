package harness

import (
	"bytes"
	"fmt"
	"math/rand/v2"
)

// probeType is an event type neither side knows.
const probeType = "x-probe/unknown"

func mutateUnknown(rng *rand.Rand, m *logModel, mu *mutant) bool {
	ignorable := rng.IntN(2) == 0
	mark := func(v *jv) {
		if ignorable {
			v.set("ignorable", jvLit("true"))
		}
	}
	suffix := ""
	if ignorable {
		suffix = ", ignorable"
	}
	var extra []any
	if ignorable {
		extra = []any{"ignorable", jvLit("true")}
	}
	empty := &jv{kind: 'o'}
	switch rng.IntN(6) {
	case 0: // an existing event gets an unknown type
		plain := m.recsWhere(func(r record) bool { return !surfaceTypes[r.typ] && !r.row })
		if len(plain) == 0 {
			return false
		}
		r := pick(rng, plain)
		v := m.vals[r.line].clone()
		v.set("type", jvString(probeType))
		mark(v)
		mu.what = fmt.Sprintf("%s: type %q%s", m.lineName(r.line), probeType, suffix)
		mu.lines = m.withLine(r.line, v.encode())
	case 1:
		mu.what = fmt.Sprintf("append a %q event%s", probeType, suffix)
		mu.lines = m.withAppended(m.event(probeType, empty, extra...))
	case 2:
		data := &jv{kind: 'o'}
		data.set("turn", jvInt(1))
		data.set("step", jvInt(1))
		data.set("message", jvString("You are a coding agent."))
		ex := append([]any{"surfaceOp", jvString("append")}, extra...)
		if rng.IntN(2) == 0 {
			ex = extra
			suffix += ", no surfaceOp"
		}
		mu.what = "append a system/message" + suffix
		mu.lines = m.withAppended(m.event("system/message", data, ex...))
	case 3:
		mu.what = "append an event of the empty type" + suffix
		mu.lines = m.withAppended(m.event("", empty, extra...))
	case 4:
		typ := pick(rng, []string{"mode/set", "request/header-delta"})
		mu.what = fmt.Sprintf("append a legacy %q event%s", typ, suffix)
		mu.lines = m.withAppended(m.event(typ, empty, extra...))
	default:
		data := &jv{kind: 'o'}
		data.set("turn", jvInt(1))
		msg, _ := parseJV([]byte(`[{"type":"text","text":"Also check the tests."}]`))
		data.set("content", msg)
		src := &jv{kind: 'o'}
		src.set("kind", jvString("user"))
		data.set("source", src)
		mu.what = "append a legacy steering/message" + suffix
		mu.lines = m.withAppended(m.event("steering/message", data, extra...))
	}
	return true
}

func mutateSeq(rng *rand.Rand, m *logModel, mu *mutant) bool {
	events := m.recsWhere(func(r record) bool { return !r.row })
	if len(events) == 0 {
		return false
	}
	r := pick(rng, events)
	if rng.IntN(3) == 0 {
		r = events[len(events)-1]
	}
	v := m.vals[r.line].clone()
	var to int64
	switch rng.IntN(4) {
	case 0, 1:
		to = r.seq + 1
	case 2:
		to = r.seq - 1
	default:
		to = r.seq + 1000
	}
	if to < 0 {
		return false
	}
	v.set("seq", jvInt(to))
	mu.what = fmt.Sprintf("%s: seq %d", m.lineName(r.line), to)
	mu.lines = m.withLine(r.line, v.encode())
	return true
}

func mutateTorn(rng *rand.Rand, m *logModel, mu *mutant) bool {
	last := len(m.lines) - 1
	if last == 0 {
		return false
	}
	lines := append([][]byte(nil), m.lines...)
	cut := func(b []byte) []byte { return b[:1+rng.IntN(len(b)-1)] }
	switch rng.IntN(8) {
	case 0:
		mu.what = "the last line cut, no newline"
		mu.lines, mu.tail = lines[:last], cut(lines[last])
	case 1:
		mu.what = "the last line cut, then a newline"
		lines[last] = cut(lines[last])
		mu.lines = lines
	case 2:
		mu.what = "garbage after the last line"
		mu.lines, mu.tail = lines, []byte("garbage\n")
	case 3:
		mu.what = "a partial turn/end after the last line"
		mu.lines, mu.tail = lines, []byte(`{"type":"turn/end","seq":`)
	case 4:
		mu.what = "an empty line after the last line"
		mu.lines, mu.tail = lines, []byte("\n")
	case 5:
		mu.what = "a JSON object that is not an event after the last line"
		mu.lines, mu.tail = lines, []byte("{}\n")
	case 6:
		i := 1 + rng.IntN(last)
		lines[i] = cut(lines[i])
		mu.what = fmt.Sprintf("%s cut in the middle of the log", m.lineName(i))
		if i < last && bytes.Contains(bytes.Join(lines[i+1:], nil), []byte(`"type":"turn/end"`)) {
			mu.what += ", a turn/end after it"
		}
		mu.lines = lines
	default:
		mu.what = "binary garbage after the last line"
		mu.lines, mu.tail = lines, []byte{0, 1, 0xff, '\n'}
	}
	return true
}

func mutateRow(rng *rand.Rand, m *logModel, mu *mutant) bool {
	rows := m.recsWhere(func(r record) bool { return r.row })
	if len(rows) == 0 {
		return false
	}
	r := pick(rng, rows)
	v := m.vals[r.line].clone()
	data := v.get("data")
	payload := "texts"
	if r.typ == "tool-call-chunks" {
		payload = "args"
	}
	dt := data.get("dt")
	var what string
	switch rng.IntN(10) {
	case 0:
		dt.vals = dt.vals[:len(dt.vals)-1]
		what = "one dt too few"
	case 1:
		dt.vals = append(dt.vals, jvInt(1))
		what = "one dt too many"
	case 2:
		data.get(payload).vals[0] = pick(rng, []*jv{jvLit("5"), jvLit("null"), {kind: 'o'}})
		what = "a member that is not a string"
	case 3:
		v.set("seq0", jvInt(r.seq+1))
		what = "seq0 one past its place"
	case 4:
		v.set("seq0", jvInt(r.seq-1))
		what = "seq0 one before its place"
	case 5:
		v.del("time0")
		what = "no time0"
	case 6:
		data.set("extra", jvLit("1"))
		what = "an extra data key"
	case 7:
		data.set("turn", jvString("1"))
		what = "turn as a string"
	case 8:
		data.set(payload, &jv{kind: 'a'})
		data.set("dt", &jv{kind: 'a'})
		what = "no member"
	default:
		dt.vals[0] = jvLit("1.5")
		what = "a fractional dt"
	}
	mu.what = m.lineName(r.line) + ": " + what
	mu.lines = m.withLine(r.line, v.encode())
	return true
}
