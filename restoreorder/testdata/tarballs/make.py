# make.py writes python-gnu.tar.gz and python-pax.tar.gz, the backups TestFromTarGzEveryCut
# reads as written by another tar than archive/tar: run it in this directory.
import tarfile, io, gzip, time
long_ns = "a-namespace-with-a-rather-long-name-that-goes-on"
items = [
    ("resources/", None),
    ("resources/pods/", None),
    ("metadata/version", b"1.1.0\n"),
    ("resources/pods/namespaces/" + long_ns + "/" + "p" * 80 + ".json", b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"' + b"p" * 80 + b'"}}'),
    ("resources/pods/namespaces/a/x.json", b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","labels":{"note":"' + b"n" * 600 + b'"}}}'),
    ("resources/configmaps/cluster/c.json", b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}'),
]
for fmt, name in ((tarfile.GNU_FORMAT, "gnu"), (tarfile.PAX_FORMAT, "pax")):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for path, body in items:
            ti = tarfile.TarInfo(path)
            ti.mtime = 1700000000
            ti.uname = "velero"; ti.gname = "velero"
            if body is None:
                ti.type = tarfile.DIRTYPE; ti.mode = 0o755
                tf.addfile(ti)
            else:
                ti.size = len(body); ti.mode = 0o644
                tf.addfile(ti, io.BytesIO(body))
    raw = buf.getvalue()
    with open("python-%s.tar.gz" % name, "wb") as f:
        f.write(gzip.compress(raw, mtime=0))
    print(name, len(raw))
