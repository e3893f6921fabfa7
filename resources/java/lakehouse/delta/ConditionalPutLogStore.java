package lakehouse.delta;

import io.delta.storage.HadoopFileSystemLogStore;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import lakehouse.s3.ConditionalPut;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * A Delta log store for S3 (s3a://) that commits with S3's conditional writes: a commit file
 * N.json is written with "If-None-Match: *", so S3 itself lets one of two writers of version N
 * win, whichever application, process or engine they run in (delta-rs commits the same way).
 *
 * <p>Delta's S3SingleDriverLogStore checks that N.json is absent and then writes it without a
 * condition, under a lock of its own JVM: two drivers can both write N.json, and the later one
 * silently replaces the earlier commit (delta-io/delta#1830). Here the check and the write are
 * one request ({@link ConditionalPut}).
 *
 * <p>A writer that loses the race gets java.nio.file.FileAlreadyExistsException, on which Delta
 * checks the winner's commit for conflicts and retries at the next version, as on HDFS. A write
 * refused because N.json already holds exactly the bytes this writer sent was its own retry,
 * whose first answer was lost: the commit is this writer's, and it succeeds rather than being
 * made again at N+1 (which would add its files twice).
 *
 * <p>Files Delta writes with overwrite (_last_checkpoint) are plain PUTs. A PUT is visible whole
 * or not at all, so no partial file is ever seen.
 */
public class ConditionalPutLogStore extends HadoopFileSystemLogStore {
  public ConditionalPutLogStore(Configuration hadoopConf) {
    super(hadoopConf);
  }

  @Override
  public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration conf)
      throws IOException {
    FileSystem fs = path.getFileSystem(conf);
    byte[] bytes = lines(actions);
    if (overwrite) {
      try (FSDataOutputStream out = fs.create(path, true)) {
        out.write(bytes);
      }
      return;
    }
    try {
      ConditionalPut.create(fs, path, bytes);
    } catch (org.apache.hadoop.fs.FileAlreadyExistsException e) {
      // Delta retries on java.nio's exception only.
      java.nio.file.FileAlreadyExistsException lost =
          new java.nio.file.FileAlreadyExistsException(path.toString());
      lost.initCause(e);
      throw lost;
    }
  }

  @Override
  public Boolean isPartialWriteVisible(Path path, Configuration conf) {
    return false;
  }

  private static byte[] lines(Iterator<String> actions) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    while (actions.hasNext()) {
      out.write(actions.next().getBytes(StandardCharsets.UTF_8));
      out.write('\n');
    }
    return out.toByteArray();
  }
}
