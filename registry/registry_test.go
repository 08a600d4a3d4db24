package registry

import (
	"slices"
	"testing"
)

func TestRegistry(t *testing.T) {
	r := New[int]("number")
	r.Register("two", 2)
	r.Register("one", 1)
	if v, ok := r.Lookup("two"); !ok || v != 2 {
		t.Fatalf("Lookup(two) = %v, %v", v, ok)
	}
	if _, ok := r.Lookup("three"); ok {
		t.Fatal("Lookup(three) found something")
	}
	if got := r.Names(); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("Names() = %v", got)
	}
	if got := r.All(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("All() = %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a name twice did not panic")
		}
	}()
	r.Register("one", 11)
}
