package dispatcher

import (
	"fmt"
	"strings"
	"unicode"
)

// headerProblem says why s cannot travel as an HTTP header value unchanged, or
// returns "": control characters anywhere, white space at either end (a
// header's ends are trimmed). effectd.check_header_text holds the same rule.
func headerProblem(field, s string) string {
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		return fmt.Sprintf("%s has a control character (%U) that an HTTP header cannot carry", field, []rune(s[i:])[0])
	}
	if strings.TrimFunc(s, unicode.IsSpace) != s {
		return field + " begins or ends with white space, which an HTTP header trims"
	}
	return ""
}
