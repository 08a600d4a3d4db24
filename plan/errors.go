package plan

import (
	"errors"
	"fmt"
	"io"

	"github.com/planrun/planrun/yamldecode"
)

// PrintError writes an error of Parse or Load as planrun's commands print
// it: one line per mistake in the plan (file:line:col and what was
// expected), or one line prefixed "planrun:" for any other error.
func PrintError(w io.Writer, err error) {
	var le *yamldecode.ListError
	if errors.As(err, &le) {
		for _, e := range le.List {
			fmt.Fprintln(w, e.Error())
		}
		return
	}
	fmt.Fprintf(w, "planrun: %v\n", err)
}
