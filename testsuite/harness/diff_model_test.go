package harness

import (
	"bytes"
	"fmt"
	"os"
)

// rowTypes are the packed chunk rows of the package's chunk-rows module.
var rowTypes = map[string]bool{"text-chunks": true, "reasoning-chunks": true, "tool-call-chunks": true}

// surfaceTypes are the harness's surface-eligible types.
var surfaceTypes = map[string]bool{"user/message": true, "assistant/message": true, "tool/result": true}

// record is one line of a restored log after its header.
type record struct {
	// line is the index of the line in logModel.lines (the header is 0).
	line int
	// seq is the seq of the record's (first) event, count how many events
	// it holds (the members of a packed row, else 1).
	seq   int64
	count int64
	typ   string
	row   bool
	// nodes is the surface before the record's first event.
	nodes []int64
}

// logModel is a restored corpus log, read line by line, from which mutants
// are made.
type logModel struct {
	rel, id, cwd string
	lines        [][]byte
	vals         []*jv
	recs         []record
	// events is the number of events; lastTime the time of the last one.
	events   int64
	lastTime int64
	// nodes is the surface after the last event.
	nodes []int64
}

// readModel reads a restored raw log.
func readModel(rel, path string) (*logModel, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return nil, fmt.Errorf("%s: the restored log does not end with a newline", rel)
	}
	m := &logModel{rel: rel}
	for _, line := range bytes.Split(b[:len(b)-1], []byte("\n")) {
		v, err := parseJV(line)
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", rel, len(m.lines), err)
		}
		if !bytes.Equal(v.encode(), line) {
			return nil, fmt.Errorf("%s: line %d does not re-encode to itself", rel, len(m.lines))
		}
		m.lines = append(m.lines, line)
		m.vals = append(m.vals, v)
	}
	h := m.vals[0]
	m.id = h.get("id").str
	if c := h.get("cwd"); c != nil {
		m.cwd = c.str
	}
	var nodes []int64
	for i, v := range m.vals[1:] {
		r := record{line: i + 1, seq: m.events, count: 1, typ: v.get("type").str, nodes: append([]int64(nil), nodes...)}
		if rowTypes[r.typ] {
			r.row = true
			members := v.at("data", "texts")
			if members == nil {
				members = v.at("data", "args")
			}
			r.count = int64(len(members.vals))
			t0, _ := v.get("time0").int()
			for _, dt := range v.at("data", "dt").vals {
				d, _ := dt.int()
				t0 += d
			}
			m.lastTime = t0
		} else {
			m.lastTime, _ = v.get("time").int()
		}
		switch op := v.get("surfaceOp"); {
		case op == nil:
		case op.kind == 's':
			nodes = append(nodes, r.seq)
		case op.kind == 'o':
			start, _ := op.get("start").int()
			end, _ := op.get("end").int()
			nodes = replaceNodes(nodes, start, end, r.seq)
		}
		m.recs = append(m.recs, r)
		m.events += r.count
	}
	m.nodes = nodes
	return m, nil
}

// replaceNodes applies a replace of the surface range start..end by seq.
func replaceNodes(nodes []int64, start, end, seq int64) []int64 {
	i, j := -1, -1
	for k, n := range nodes {
		if n == start {
			i = k
		}
		if n == end {
			j = k
		}
	}
	if i < 0 || j < i {
		return nodes
	}
	out := append(append(append([]int64(nil), nodes[:i]...), seq), nodes[j+1:]...)
	return out
}

// withLine returns a copy of the log's lines with line i replaced.
func (m *logModel) withLine(i int, line []byte) [][]byte {
	out := append([][]byte(nil), m.lines...)
	out[i] = line
	return out
}

// withAppended returns a copy of the log's lines with more lines at the end.
func (m *logModel) withAppended(lines ...[]byte) [][]byte {
	return append(append([][]byte(nil), m.lines...), lines...)
}

// event builds an event line appended at the end of the log.
func (m *logModel) event(typ string, data *jv, extra ...any) []byte {
	v := &jv{kind: 'o'}
	v.set("type", jvString(typ))
	v.set("seq", jvInt(m.events))
	v.set("time", jvInt(m.lastTime))
	v.set("data", data)
	for i := 0; i+1 < len(extra); i += 2 {
		v.set(extra[i].(string), extra[i+1].(*jv))
	}
	return v.encode()
}

// recsWhere lists the records that satisfy keep.
func (m *logModel) recsWhere(keep func(record) bool) []record {
	var out []record
	for _, r := range m.recs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}
