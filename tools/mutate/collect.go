package main

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// listed is the part of `go list -json` the tool reads.
type listed struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	DepOnly    bool
	fset       *token.FileSet
	files      []*ast.File
	names      []string
	info       *types.Info
}

// loadPackage parses and type-checks the target package against the export
// data of its dependencies, as compiled by the go command.
func loadPackage(module, target string) (*listed, error) {
	out, code, err := goCmd(context.Background(), module, []string{"list", "-deps", "-export", "-json", target})
	if err != nil || code != 0 {
		return nil, fmt.Errorf("go list %s: %v\n%s", target, err, out)
	}
	exports := map[string]string{}
	var pkg *listed
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly {
			q := p
			pkg = &q
		}
	}
	if pkg == nil {
		return nil, fmt.Errorf("go list %s: no package", target)
	}
	pkg.fset = token.NewFileSet()
	for _, name := range pkg.GoFiles {
		path := filepath.Join(pkg.Dir, name)
		f, err := parser.ParseFile(pkg.fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		pkg.files = append(pkg.files, f)
		pkg.names = append(pkg.names, path)
	}
	imp := importer.ForCompiler(pkg.fset, "gc", func(path string) (io.ReadCloser, error) {
		e, ok := exports[path]
		if !ok || e == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(e)
	})
	pkg.info = &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check(pkg.ImportPath, pkg.fset, pkg.files, pkg.info); err != nil {
		return nil, fmt.Errorf("type-check %s: %w", pkg.ImportPath, err)
	}
	return pkg, nil
}

// loggingMethods are calls whose removal only silences a log line.
var loggingMethods = map[string]bool{
	"Debug": true, "Info": true, "Warn": true, "Error": true,
	"DebugContext": true, "InfoContext": true, "WarnContext": true, "ErrorContext": true,
	"Log": true, "LogAttrs": true, "Printf": true, "Println": true, "Print": true,
}

// collect finds every mutant of the package, in source order.
func collect(cfg config, pkg *listed) ([]*mutant, error) {
	var muts []*mutant
	seen := map[string]int{}
	for fi, f := range pkg.files {
		absFile := pkg.names[fi]
		rel, _ := filepath.Rel(cfg.module, absFile)
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(absFile)
		if err != nil {
			return nil, err
		}
		lines := strings.Split(string(src), "\n")
		add := func(pos token.Pos, op, fn, change string, apply, undo func()) {
			if !cfg.ops[op] {
				return
			}
			p := pkg.fset.Position(pos)
			text := ""
			if p.Line-1 < len(lines) {
				text = strings.Join(strings.Fields(lines[p.Line-1]), " ")
			}
			base := fmt.Sprintf("%s|%s|%s|%s|%s", rel, fn, op, change, text)
			n := seen[base]
			seen[base]++
			muts = append(muts, &mutant{
				Index: len(muts), File: rel, Line: p.Line, Col: p.Column, Op: op, Func: fn,
				Change: change, Key: fmt.Sprintf("%s#%d", base, n),
				absFile: absFile, apply: apply, undo: undo, astFile: f,
			})
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fn := funcName(fd)
			walkFunc(pkg, fd.Type, fd.Body, fn, add)
		}
	}
	return muts, nil
}

type adder func(pos token.Pos, op, fn, change string, apply, undo func())

// walkFunc visits one function body; nested function literals are visited
// with their own signature so that ERROR_NIL knows their result types.
func walkFunc(pkg *listed, ftype *ast.FuncType, body *ast.BlockStmt, fn string, add adder) {
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.FuncLit:
			walkFunc(pkg, x.Type, x.Body, fn+".func", add)
			return false
		case *ast.BinaryExpr:
			binary(pkg, x, fn, add)
		case *ast.IncDecStmt:
			orig := x.Tok
			alt := token.DEC
			if orig == token.DEC {
				alt = token.INC
			}
			add(x.TokPos, opIncDec, fn, orig.String()+" -> "+alt.String(),
				func() { x.Tok = alt }, func() { x.Tok = orig })
		case *ast.UnaryExpr:
			if x.Op == token.SUB {
				if _, lit := x.X.(*ast.BasicLit); !lit {
					add(x.OpPos, opNegative, fn, "-x -> +x",
						func() { x.Op = token.ADD }, func() { x.Op = token.SUB })
				}
			}
		case *ast.BlockStmt:
			removals(x.List, fn, add)
		case *ast.CaseClause:
			removals(x.Body, fn, add)
		case *ast.CommClause:
			removals(x.Body, fn, add)
		case *ast.ReturnStmt:
			errorNil(ftype, x, fn, add)
		}
		return true
	})
}

func binary(pkg *listed, x *ast.BinaryExpr, fn string, add adder) {
	orig := x.Op
	set := func(op string, to token.Token) {
		add(x.OpPos, op, fn, orig.String()+" -> "+to.String(),
			func() { x.Op = to }, func() { x.Op = orig })
	}
	switch orig {
	case token.LSS:
		set(opBoundary, token.LEQ)
		set(opNegation, token.GEQ)
	case token.LEQ:
		set(opBoundary, token.LSS)
		set(opNegation, token.GTR)
	case token.GTR:
		set(opBoundary, token.GEQ)
		set(opNegation, token.LEQ)
	case token.GEQ:
		set(opBoundary, token.GTR)
		set(opNegation, token.LSS)
	case token.EQL:
		set(opNegation, token.NEQ)
	case token.NEQ:
		set(opNegation, token.EQL)
	case token.LAND:
		set(opLogical, token.LOR)
	case token.LOR:
		set(opLogical, token.LAND)
	case token.ADD, token.SUB, token.MUL, token.QUO, token.REM:
		tv, ok := pkg.info.Types[x]
		if !ok || tv.Value != nil { // constant expressions are left alone
			return
		}
		b, ok := tv.Type.Underlying().(*types.Basic)
		if !ok || b.Info()&types.IsNumeric == 0 {
			return
		}
		to := map[token.Token]token.Token{token.ADD: token.SUB, token.SUB: token.ADD, token.MUL: token.QUO, token.QUO: token.MUL, token.REM: token.MUL}[orig]
		set(opArith, to)
	}
}

// removals offers the removal of every call statement of a statement list.
func removals(list []ast.Stmt, fn string, add adder) {
	for i, s := range list {
		var call *ast.CallExpr
		switch st := s.(type) {
		case *ast.ExprStmt:
			call, _ = st.X.(*ast.CallExpr)
		case *ast.DeferStmt:
			call = st.Call
		case *ast.AssignStmt:
			if len(st.Lhs) == 1 && len(st.Rhs) == 1 && isBlank(st.Lhs[0]) {
				call, _ = st.Rhs[0].(*ast.CallExpr)
			}
		}
		if call == nil || isLogging(call) {
			continue
		}
		i, s := i, s
		add(s.Pos(), opRemove, fn, "remove "+callName(call)+"(...)",
			func() { list[i] = &ast.EmptyStmt{Semicolon: s.Pos(), Implicit: true} },
			func() { list[i] = s })
	}
}

// errorNil offers, for every returned value in an error result slot that is
// not already nil, to return nil instead.
func errorNil(ftype *ast.FuncType, r *ast.ReturnStmt, fn string, add adder) {
	if ftype.Results == nil {
		return
	}
	var slots []ast.Expr
	for _, fld := range ftype.Results.List {
		n := len(fld.Names)
		if n == 0 {
			n = 1
		}
		for k := 0; k < n; k++ {
			slots = append(slots, fld.Type)
		}
	}
	if len(r.Results) != len(slots) {
		return
	}
	for i, e := range r.Results {
		if id, ok := slots[i].(*ast.Ident); !ok || id.Name != "error" {
			continue
		}
		if id, ok := e.(*ast.Ident); ok && id.Name == "nil" {
			continue
		}
		i, e := i, e
		add(e.Pos(), opErrNil, fn, "return error -> return nil",
			func() { r.Results[i] = &ast.Ident{NamePos: e.Pos(), Name: "nil"} },
			func() { r.Results[i] = e })
	}
}

func isBlank(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "_"
}

func isLogging(c *ast.CallExpr) bool {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	return ok && loggingMethods[sel.Sel.Name]
}

func callName(c *ast.CallExpr) string {
	switch f := c.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return exprString(f.X) + "." + f.Sel.Name
	case *ast.FuncLit:
		return "func"
	}
	return "call"
}

func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.CallExpr:
		return callName(x) + "()"
	case *ast.IndexExpr:
		return exprString(x.X) + "[...]"
	case *ast.ParenExpr:
		return "(" + exprString(x.X) + ")"
	case *ast.StarExpr:
		return "*" + exprString(x.X)
	}
	return "expr"
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		return "(*" + typeName(s.X) + ")." + fd.Name.Name
	}
	return typeName(t) + "." + fd.Name.Name
}

func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		return typeName(x.X)
	case *ast.IndexListExpr:
		return typeName(x.X)
	}
	return "T"
}
