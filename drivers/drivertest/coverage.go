package drivertest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/planrun/planrun/drivers"
)

// CheckCovered fails t for every registered driver whose package has no
// conformance test: a _test.go file of the package's directory that calls
// drivertest.Run with a drivertest.Suite whose Driver is the driver's name
// written as a literal. root is the module's root directory (where go.mod
// is). The root package's tests call it with every driver the binary
// registers, so a new driver without a conformance test fails them.
func CheckCovered(t testing.TB, root string) {
	t.Helper()
	module, err := modulePath(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range drivers.Names() {
		d, _ := drivers.Lookup(name)
		pkg := packageOf(d)
		rel, ok := strings.CutPrefix(pkg, module+"/")
		if !ok {
			t.Errorf("driver %s: its package %s is outside module %s", name, pkg, module)
			continue
		}
		dir := filepath.Join(root, filepath.FromSlash(rel))
		found, err := Covers(dir, name)
		if err != nil {
			t.Errorf("driver %s: %v", name, err)
			continue
		}
		if !found {
			t.Errorf("driver %s has no conformance test: add to %s a test that calls drivertest.Run(t, drivertest.Suite{Driver: %q, ...})", name, dir, name)
		}
	}
}

// packageOf is the import path of the package that defines a driver: the
// package of its target config type.
func packageOf(d drivers.Driver) string {
	typ := reflect.TypeOf(d.NewTargetConfig())
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	return typ.PkgPath()
}

func modulePath(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("%s/go.mod names no module", root)
}

// Covers reports whether a _test.go file in dir calls drivertest.Run and
// builds a drivertest.Suite with Driver: "<name>".
func Covers(dir, name string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return false, err
	}
	want := strconv.Quote(name)
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			return false, err
		}
		local := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == strconv.Quote("github.com/planrun/planrun/drivers/drivertest") {
				local = "drivertest"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			continue
		}
		var runs, suite bool
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				if isSel(x.Fun, local, "Run") {
					runs = true
				}
			case *ast.CompositeLit:
				if !isSel(x.Type, local, "Suite") {
					return true
				}
				for _, e := range x.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Driver" {
						if v, ok := kv.Value.(*ast.BasicLit); ok && v.Value == want {
							suite = true
						}
					}
				}
			}
			return true
		})
		if runs && suite {
			return true, nil
		}
	}
	return false, nil
}

func isSel(e ast.Expr, pkg, name string) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := s.X.(*ast.Ident)
	return ok && x.Name == pkg && s.Sel.Name == name
}
