package expr

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/planrun/planrun/units"
)

// FormatValue prints a value for people: byte counts in MB when the
// expression is about bytes, durations rounded, floats trimmed.
func FormatValue(src string, v any) string {
	switch x := v.(type) {
	case time.Duration:
		return x.Round(time.Millisecond).String()
	case float64, int64, int:
		f := toFloat(x)
		if math.IsNaN(f) {
			return "n/a"
		}
		if strings.Contains(src, "bytes") {
			return units.Human(f)
		}
		if f == float64(int64(f)) {
			return strconv.FormatInt(int64(f), 10)
		}
		return strconv.FormatFloat(f, 'f', 2, 64)
	}
	return units.Value(v)
}

// CheckFormat tries a printf format on a value of the expression's kind
// and says what is wrong ("" when it prints cleanly).
func CheckFormat(format string, kind reflect.Kind) string {
	if !strings.Contains(format, "%") {
		return "needs a % verb such as %.1f"
	}
	var sample any
	switch kind {
	case reflect.Float64, reflect.Float32:
		sample = 1.5
	case reflect.Int, reflect.Int64:
		sample = int64(1)
	case reflect.String:
		sample = "x"
	case reflect.Bool:
		sample = true
	case reflect.Struct, reflect.Map, reflect.Slice:
		return "cannot print a whole group of figures; pick one, such as .p99"
	default:
		// Unknown at load time (an interface value): try a number.
		sample = 1.5
	}
	if out := fmt.Sprintf(format, sample); strings.Contains(out, "%!") {
		return fmt.Sprintf("does not fit a %T value (it prints %q); for numbers use %%.0f or %%.2f", sample, out)
	}
	return ""
}

// FormatCell prints a table cell value.
func FormatCell(format string, v any) string {
	if v == nil {
		return "" // a probe whose step was skipped by its if:
	}
	if f, ok := v.(float64); ok && math.IsNaN(f) {
		return "n/a"
	}
	if format != "" {
		switch v.(type) {
		case float64, int64, int, string, bool:
			return fmt.Sprintf(format, v)
		}
	}
	return FormatValue("", v)
}
