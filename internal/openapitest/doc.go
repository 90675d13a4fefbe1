// Package openapitest checks effectd's OpenAPI descriptions in tests: it loads
// a description with kin-openapi and fails the test on anything the validator
// finds, lists the operations it documents, and validates live answers against
// the documented response schemas.
package openapitest
