package harness

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// mutant is a restored corpus log changed in one way.
type mutant struct {
	rel   string // the corpus log it comes from
	class string
	what  string
	id    string // the session id both sides load
	cwd   string // where the log is placed
	lines [][]byte
	// tail follows the last line's newline (a torn fragment, garbage).
	tail []byte
	zstd bool
}

// mutantClasses are the classes of mutants, in report order.
var mutantClasses = []string{"dropped", "duplicated", "retyped", "surfaceOp", "sourceEventSeqs",
	"unknown-type", "seq", "torn", "packed-row"}

// mutantsPerClass is how many mutants of each class a log gets (fewer when
// a class has nothing to change in it).
const mutantsPerClass = 2

// mutantSeed fixes the mutants: the same corpus gives the same mutants.
const mutantSeed = 0x5e5510f1

// makeMutants makes the mutants of the corpus logs, deterministically. Every
// tenth mutant is also written zstd-compressed.
func makeMutants(models []*logModel) []mutant {
	rng := rand.New(rand.NewPCG(mutantSeed, 24))
	var out []mutant
	for _, m := range models {
		for _, class := range mutantClasses {
			seen := map[string]bool{}
			for range mutantsPerClass * 4 {
				if len(seen) == mutantsPerClass {
					break
				}
				mu, ok := mutateOnce(rng, m, class)
				if !ok || seen[mu.what] {
					continue
				}
				seen[mu.what] = true
				out = append(out, mu)
				if len(out)%10 == 0 {
					z := mu
					z.zstd = true
					out = append(out, z)
				}
			}
		}
	}
	return out
}

// mutateOnce makes one mutant of a class, or reports that the pick had
// nothing to change.
func mutateOnce(rng *rand.Rand, m *logModel, class string) (mutant, bool) {
	mu := mutant{rel: m.rel, class: class, id: m.id, cwd: m.cwd}
	var ok bool
	switch class {
	case "dropped":
		ok = mutateDropped(rng, m, &mu)
	case "duplicated":
		ok = mutateDuplicated(rng, m, &mu)
	case "retyped":
		ok = mutateRetyped(rng, m, &mu)
	case "surfaceOp":
		ok = mutateSurfaceOp(rng, m, &mu)
	case "sourceEventSeqs":
		ok = mutateSources(rng, m, &mu)
	case "unknown-type":
		ok = mutateUnknown(rng, m, &mu)
	case "seq":
		ok = mutateSeq(rng, m, &mu)
	case "torn":
		ok = mutateTorn(rng, m, &mu)
	case "packed-row":
		ok = mutateRow(rng, m, &mu)
	}
	return mu, ok
}

// path is a place in a line's value: object keys and array indexes.
type path []string

func (p path) String() string { return strings.Join(p, ".") }

// paths lists the places in v down to depth, an array contributing its
// first and last items; objects only when objectsOnly.
func paths(v *jv, depth int, objectsOnly bool) []path {
	var out []path
	var walk func(v *jv, p path)
	walk = func(v *jv, p path) {
		if len(p) > 0 && (!objectsOnly || v.kind == 'o') {
			out = append(out, slices.Clone(p))
		}
		if len(p) >= depth {
			return
		}
		switch v.kind {
		case 'o':
			for i, k := range v.keys {
				walk(v.vals[i], append(p, k))
			}
		case 'a':
			if n := len(v.vals); n > 0 {
				walk(v.vals[0], append(p, "0"))
				if n > 1 {
					walk(v.vals[n-1], append(p, strconv.Itoa(n-1)))
				}
			}
		}
	}
	walk(v, nil)
	return out
}

// pick returns a random element of xs.
func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// pickLine picks a line to mutate: the header one time in ten, else an event
// line (a packed row only when rows is true).
func pickLine(rng *rand.Rand, m *logModel, rows bool) int {
	if rng.IntN(10) == 0 || len(m.recs) == 0 {
		return 0
	}
	candidates := m.recsWhere(func(r record) bool { return rows || !r.row })
	if len(candidates) == 0 {
		return 0
	}
	return pick(rng, candidates).line
}

// lineName names a line for a mutant's description.
func (m *logModel) lineName(i int) string {
	if i == 0 {
		return "header"
	}
	r := m.recs[i-1]
	if r.row {
		return fmt.Sprintf("%s row at seq0 %d", r.typ, r.seq)
	}
	return fmt.Sprintf("%s at seq %d", r.typ, r.seq)
}

// parent returns the value holding the place p and the last step of p.
func parent(v *jv, p path) (*jv, string) {
	return v.at(p[:len(p)-1]...), p[len(p)-1]
}

func mutateDropped(rng *rand.Rand, m *logModel, mu *mutant) bool {
	i := pickLine(rng, m, true)
	v := m.vals[i].clone()
	// Prefer the envelope, then data, then nested fields, evenly.
	depth := 1 + rng.IntN(4)
	var ps []path
	for _, p := range paths(v, depth, false) {
		if len(p) == depth || (depth == 4 && len(p) > 4) {
			if par, _ := parent(v, p); par != nil && par.kind == 'o' {
				ps = append(ps, p)
			}
		}
	}
	if len(ps) == 0 {
		return false
	}
	p := pick(rng, ps)
	par, k := parent(v, p)
	par.del(k)
	mu.what = fmt.Sprintf("%s: drop %s", m.lineName(i), p)
	mu.lines = m.withLine(i, v.encode())
	return true
}

func mutateDuplicated(rng *rand.Rand, m *logModel, mu *mutant) bool {
	i := pickLine(rng, m, true)
	v := m.vals[i].clone()
	objs := append([]path{nil}, paths(v, 4, true)...)
	o := v.at(pick(rng, objs)...)
	if o == nil || len(o.keys) == 0 {
		return false
	}
	k := rng.IntN(len(o.keys))
	val := o.vals[k].clone()
	how := "same value"
	if rng.IntN(2) == 0 {
		val, how = retype(rng, val)
	}
	o.keys = append(o.keys, o.keys[k])
	o.vals = append(o.vals, val)
	mu.what = fmt.Sprintf("%s: repeat key %q (%s)", m.lineName(i), o.keys[k], how)
	mu.lines = m.withLine(i, v.encode())
	return true
}

var (
	// invalidUTF8 is a string holding a byte that is not UTF-8.
	invalidUTF8 = jvRaw("\"caf\xe9\"")
	// deepNesting is an array nested 600 deep, tooDeep one nested 10,001
	// deep: past sessionflow's bound and past what JSON.stringify, the
	// package's writer, can write.
	deepNesting = jvRaw(strings.Repeat("[", 600) + strings.Repeat("]", 600))
	tooDeep     = jvRaw(strings.Repeat("[", 10001) + strings.Repeat("]", 10001))
)

// retype returns another value in place of v, and what it did.
func retype(rng *rand.Rand, v *jv) (*jv, string) {
	switch v.kind {
	case 'o':
		r := pick(rng, []*jv{{kind: 'a'}, jvLit("null"), jvString("x"), deepNesting})
		if r == deepNesting {
			if rng.IntN(2) == 0 {
				return tooDeep, "object retyped to an array nested 10,001 deep"
			}
			return r, "object retyped to an array nested 600 deep"
		}
		return r, "object retyped to " + string(r.encode())
	case 'a':
		r := pick(rng, []*jv{{kind: 'o'}, jvLit("null"), {kind: 'a', vals: []*jv{jvLit("null")}}})
		return r, "array retyped to " + string(r.encode())
	case 's':
		r := pick(rng, []*jv{jvLit("7"), jvString(""), jvLit("null"), {kind: 'o'}, {kind: 'a'}, invalidUTF8})
		return r, "string retyped to " + string(r.encode())
	}
	if n, ok := v.int(); ok {
		alts := []*jv{jvString(v.lit), jvInt(-n - 1), jvLit(v.lit + ".5"), jvLit("1e400"),
			jvLit("9007199254740993"), jvLit("-0"), jvLit(v.lit + ".0"), jvLit("null")}
		r := pick(rng, alts)
		return r, "number retyped to " + string(r.encode())
	}
	return pick(rng, []*jv{jvLit("0"), jvString(v.lit), {kind: 'o'}}), "literal retyped"
}

func mutateRetyped(rng *rand.Rand, m *logModel, mu *mutant) bool {
	i := pickLine(rng, m, true)
	v := m.vals[i].clone()
	ps := paths(v, 5, false)
	if len(ps) == 0 {
		return false
	}
	p := pick(rng, ps)
	par, k := parent(v, p)
	nv, how := retype(rng, v.at(p...))
	if par.kind == 'a' {
		idx, _ := strconv.Atoi(k)
		par.vals[idx] = nv
	} else {
		par.set(k, nv)
	}
	mu.what = fmt.Sprintf("%s: %s %s", m.lineName(i), p, how)
	mu.lines = m.withLine(i, v.encode())
	return true
}

// surfaceRecs are the records of surface events.
func (m *logModel) surfaceRecs() []record {
	return m.recsWhere(func(r record) bool { return surfaceTypes[r.typ] })
}

// replaceOp builds {op:"replace", start, end} (startSeq/endSeq when v3).
func replaceOp(start, end int64, v3 bool) *jv {
	o := &jv{kind: 'o'}
	o.set("op", jvString("replace"))
	if v3 {
		o.set("startSeq", jvInt(start))
		o.set("endSeq", jvInt(end))
	} else {
		o.set("start", jvInt(start))
		o.set("end", jvInt(end))
	}
	return o
}

func seqArray(seqs ...int64) *jv {
	a := &jv{kind: 'a'}
	for _, s := range seqs {
		a.vals = append(a.vals, jvInt(s))
	}
	return a
}

func mutateSurfaceOp(rng *rand.Rand, m *logModel, mu *mutant) bool {
	recs := m.surfaceRecs()
	if len(recs) == 0 {
		return false
	}
	r := pick(rng, recs)
	v := m.vals[r.line].clone()
	nodes := r.nodes
	var what string
	switch op := rng.IntN(10); {
	case op == 0:
		v.del("surfaceOp")
		what = "drop surfaceOp"
	case op == 1:
		v.set("surfaceOp", jvString("prepend"))
		what = `surfaceOp "prepend"`
	case op <= 5 && len(nodes) > 0:
		i := rng.IntN(len(nodes))
		j := i + rng.IntN(min(3, len(nodes)-i))
		v3 := op == 5
		v.set("surfaceOp", replaceOp(nodes[i], nodes[j], v3))
		src := slices.Clone(nodes[i : j+1])
		if op == 3 && len(src) > 0 {
			src = src[:len(src)-1]
		}
		if len(src) > 0 {
			v.set("sourceEventSeqs", seqArray(src...))
		} else {
			v.del("sourceEventSeqs")
		}
		what = fmt.Sprintf("replace %d..%d (nodes %d..%d), sources %v", nodes[i], nodes[j], i, j, src)
		if v3 {
			what += ", v3 spelling startSeq/endSeq"
		}
	case op == 6 && len(nodes) > 1:
		i := rng.IntN(len(nodes) - 1)
		v.set("surfaceOp", replaceOp(nodes[i+1], nodes[i], false))
		v.set("sourceEventSeqs", seqArray(nodes[i], nodes[i+1]))
		what = fmt.Sprintf("replace %d..%d with start after end", nodes[i+1], nodes[i])
	case op == 7:
		v.set("surfaceOp", replaceOp(r.seq, r.seq+2, false))
		what = fmt.Sprintf("replace %d..%d beyond the log", r.seq, r.seq+2)
	case op == 8:
		o := replaceOp(0, 0, false)
		o.set("x", jvLit("1"))
		v.set("surfaceOp", o)
		what = "replace with an extra key"
	default:
		plain := m.recsWhere(func(x record) bool { return !surfaceTypes[x.typ] && !x.row })
		if len(plain) == 0 {
			return false
		}
		nr := pick(rng, plain)
		v = m.vals[nr.line].clone()
		v.set("surfaceOp", jvString("append"))
		mu.what = fmt.Sprintf("%s: surfaceOp on a type without surface", m.lineName(nr.line))
		mu.lines = m.withLine(nr.line, v.encode())
		return true
	}
	mu.what = m.lineName(r.line) + ": " + what
	mu.lines = m.withLine(r.line, v.encode())
	return true
}

func mutateSources(rng *rand.Rand, m *logModel, mu *mutant) bool {
	recs := m.surfaceRecs()
	if len(recs) == 0 {
		return false
	}
	r := pick(rng, recs)
	v := m.vals[r.line].clone()
	earlier := max(r.seq-1, 0)
	var what string
	switch rng.IntN(7) {
	case 0:
		v.set("sourceEventSeqs", &jv{kind: 'a'})
		what = "empty sourceEventSeqs"
	case 1:
		v.set("sourceEventSeqs", seqArray(earlier, earlier))
		what = "a repeated source"
	case 2:
		v.set("sourceEventSeqs", seqArray(r.seq))
		what = "a source that is the event itself"
	case 3:
		v.set("sourceEventSeqs", seqArray(r.seq+1))
		what = "a later source"
	case 4:
		v.set("sourceEventSeqs", &jv{kind: 'a', vals: []*jv{pick(rng, []*jv{jvLit("1.5"), jvString("1"), jvLit("-1"), jvLit("null")})}})
		what = "a source that is not a seq"
	case 5:
		if !v.del("sourceEventSeqs") {
			return false
		}
		what = "drop sourceEventSeqs"
	default:
		plain := m.recsWhere(func(x record) bool { return !surfaceTypes[x.typ] && !x.row })
		if len(plain) == 0 {
			return false
		}
		nr := pick(rng, plain)
		v = m.vals[nr.line].clone()
		v.set("sourceEventSeqs", seqArray(0))
		mu.what = fmt.Sprintf("%s: sourceEventSeqs on a type without surface", m.lineName(nr.line))
		mu.lines = m.withLine(nr.line, v.encode())
		return true
	}
	mu.what = m.lineName(r.line) + ": " + what
	mu.lines = m.withLine(r.line, v.encode())
	return true
}
