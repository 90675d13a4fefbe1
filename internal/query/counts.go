package query

import _ "embed"

// FoldCounts folds the deltas of the settled counts (intent_count_deltas) into
// intent_counts, so readers add only the few appended since.
//
//go:embed fold_counts.sql
var FoldCounts string

// MarkIDs records the last id handed out now (id_marks) unless none was drawn
// since the last mark, and forgets marks older than $1 (an interval).
//
//go:embed mark_ids.sql
var MarkIDs string

//go:embed id_before.sql
var idBeforeSQL string
