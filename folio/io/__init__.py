"""Where documents come from and where what folio keeps goes: sources (local files and
folders, ``s3://`` prefixes), sinks (a folder or an S3 prefix, one interface), the S3
client and its TLS, the names of the records under an output location (:mod:`.layout`)
and keys made safe from untrusted names (:mod:`.keys`)."""
