package crashfs

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type Mode int

func (m Mode) String() string {
	switch m {
	case LoseVolatile:
		return "lose"
	case KeepVolatile:
		return "keep"
	case Mixed:
		return "mixed"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

type Policy struct {
	// Mode says which volatile changes survive.
	Mode Mode
	// Seed drives the choices of Mixed.
	Seed uint64
}

func (p Policy) String() string {
	if p.Mode == Mixed {
		return fmt.Sprintf("mixed/%d", p.Seed)
	}
	return p.Mode.String()
}

func (f *FS) PowerLoss(p Policy) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashed = true
	for h := range f.open {
		_ = h.inner.Close()
	}
	f.open = map[*file]struct{}{}
	f.gen++

	c := &chooser{policy: p, rng: rand.New(rand.NewPCG(p.Seed, 0x5eed)), data: map[*node][]byte{}}
	if err := c.currentPaths(f.root, f.top); err != nil {
		return nil, err
	}
	survivors := c.tree(f.root, f.top)
	if err := c.pickData(f.root, survivors); err != nil {
		return nil, err
	}

	entries, err := os.ReadDir(f.root)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(f.root, e.Name())); err != nil {
			return nil, err
		}
	}
	if err := c.build(f.root, survivors, map[*node]string{}); err != nil {
		return nil, err
	}
	if err := f.scan(); err != nil {
		return nil, err
	}
	f.n, f.crashAt, f.crashed, f.records = 0, -1, false, nil
	return c.report, nil
}

type chooser struct {
	policy Policy
	rng    *rand.Rand
	paths  map[*node][]string // the current real paths of each named file
	data   map[*node][]byte   // chosen data of each surviving file
	report []string
}

type survivor struct {
	n        *node
	children map[string]*survivor
}

func (c *chooser) currentPaths(path string, d *node) error {
	if c.paths == nil {
		c.paths = map[*node][]string{}
	}
	for name, n := range d.entries {
		p := filepath.Join(path, name)
		switch n.kind {
		case fs.ModeDir:
			if err := c.currentPaths(p, n); err != nil {
				return err
			}
		case 0:
			c.paths[n] = append(c.paths[n], p)
		}
	}
	return nil
}

func (c *chooser) keep() bool {
	switch c.policy.Mode {
	case KeepVolatile:
		return true
	case Mixed:
		return c.rng.IntN(2) == 1
	}
	return false
}

func (c *chooser) tree(path string, d *node) map[string]*survivor {
	names := make([]string, 0, len(d.entries)+len(d.syncedEntries))
	for name := range d.entries {
		names = append(names, name)
	}
	for name := range d.syncedEntries {
		if _, ok := d.entries[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := map[string]*survivor{}
	for _, name := range names {
		p := filepath.Join(path, name)
		synced, current := d.syncedEntries[name], d.entries[name]
		n := synced
		if synced != current {
			if c.keep() {
				n = current
			}
			c.report = append(c.report, fmt.Sprintf("%s: volatile name %s", p, describeChoice(synced, current, n)))
		}
		if n == nil {
			continue
		}
		s := &survivor{n: n}
		if n.kind == fs.ModeDir {
			s.children = c.tree(p, n)
		}
		out[name] = s
	}
	return out
}

func describeChoice(synced, current, chosen *node) string {
	what := func(n *node) string {
		if n == nil {
			return "absent"
		}
		return "present"
	}
	if synced != nil && current != nil {
		if chosen == current {
			return "replacement kept"
		}
		return "replacement lost"
	}
	if chosen == current {
		return what(synced) + " -> " + what(current) + " kept"
	}
	return what(synced) + " -> " + what(current) + " lost"
}

func (c *chooser) fileData(path string, n *node) ([]byte, error) {
	if d, ok := c.data[n]; ok {
		return d, nil
	}
	current := n.detached
	names := c.paths[n]
	if len(names) > 0 {
		d, err := os.ReadFile(names[0])
		if err != nil {
			return nil, err
		}
		current = d
		sort.Strings(names)
		path = strings.Join(names, " = ")
	}
	chosen := n.synced
	if string(current) != string(n.synced) {
		switch c.policy.Mode {
		case KeepVolatile:
			chosen = current
		case Mixed:
			extends := len(current) > len(n.synced) && string(current[:len(n.synced)]) == string(n.synced)
			switch k := c.rng.IntN(3); {
			case k == 1:
				chosen = current
			case k == 2 && extends && len(current)-len(n.synced) > 1:
				chosen = current[:len(n.synced)+1+c.rng.IntN(len(current)-len(n.synced)-1)]
			}
		}
		c.report = append(c.report, fmt.Sprintf("%s: volatile data, %d synced bytes, %d now, %d kept", path, len(n.synced), len(current), len(chosen)))
	}
	c.data[n] = chosen
	return chosen, nil
}

func (c *chooser) pickData(path string, entries map[string]*survivor) error {
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := entries[name]
		p := filepath.Join(path, name)
		switch s.n.kind {
		case fs.ModeDir:
			if err := c.pickData(p, s.children); err != nil {
				return err
			}
		case 0:
			if _, err := c.fileData(p, s.n); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *chooser) build(path string, entries map[string]*survivor, written map[*node]string) error {
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := entries[name]
		p := filepath.Join(path, name)
		switch s.n.kind {
		case fs.ModeDir:
			if err := os.Mkdir(p, s.n.perm|0o700); err != nil {
				return err
			}
			if err := c.build(p, s.children, written); err != nil {
				return err
			}
		case fs.ModeSymlink:
			if err := os.Symlink(s.n.target, p); err != nil {
				return err
			}
		default:
			if first, ok := written[s.n]; ok {
				if err := os.Link(first, p); err != nil {
					return err
				}
				continue
			}
			if err := os.WriteFile(p, c.data[s.n], s.n.perm|0o600); err != nil {
				return err
			}
			written[s.n] = p
		}
	}
	return nil
}
