package intentdb

import (
	_ "embed"
	"strconv"
	"strings"
	"text/template"
)

//go:embed notices_bucket.sql
var noticesBucketText string

//go:embed rollups_bucket.sql
var rollupsBucketText string

// rollupsBucketCTE is rollups_bucket.sql from its CTE on.
var rollupsBucketCTE = rollupsBucketText[strings.Index(rollupsBucketText, "\nrolled AS (")+1:]

// noticesBucketCTEs is notices_bucket.sql from its first CTE on: the header
// comment names the placeholders it fills.
var noticesBucketCTEs = noticesBucketText[strings.Index(noticesBucketText, "\noutcomes AS (")+1:]

// withNotices returns the statement text of file name (a statement of the
// distributed mode that settles an intent or moves its delivery) with the
// producer's notifications written into it: each {{notices "cte" n}} there
// becomes the CTEs of notices_bucket.sql reading the moved rows of CTE cte,
// on the bucket of parameter $n; and each {{rollups "cte" n "old"}} the
// minute rollups' deltas of those rows (rollups_bucket.sql), old naming the
// status they had before. It panics on a text that does not parse: the
// statements are embedded, and a test loads the package.
func withNotices(name, text string) string {
	notices := func(moved string, bucket int) string {
		return strings.NewReplacer("MOVED", moved, "$BUCKET", "$"+strconv.Itoa(bucket)).Replace(noticesBucketCTEs)
	}
	rollups := func(moved string, bucket int, old string) string {
		return strings.NewReplacer("MOVED", moved, "$BUCKET", "$"+strconv.Itoa(bucket), "OLD", old).Replace(rollupsBucketCTE)
	}
	t := template.Must(template.New(name).Funcs(template.FuncMap{"notices": notices, "rollups": rollups}).Parse(text))
	var b strings.Builder
	if err := t.Execute(&b, nil); err != nil {
		panic(name + ": " + err.Error())
	}
	if !strings.Contains(b.String(), "notified AS (") {
		panic(name + ": no {{notices}} in it")
	}
	return b.String()
}
