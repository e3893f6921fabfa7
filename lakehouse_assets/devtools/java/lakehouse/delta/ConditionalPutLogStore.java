package lakehouse.delta;

import io.delta.storage.HadoopFileSystemLogStore;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Iterator;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.AWSServiceIOException;
import org.apache.hadoop.fs.s3a.RemoteFileChangedException;

/**
 * A Delta log store for S3 (s3a://) that commits with S3's conditional writes: a commit file
 * N.json is written with "If-None-Match: *", so S3 itself lets one of two writers of version N
 * win, whichever application, process or engine they run in (delta-rs commits the same way).
 *
 * <p>Delta's S3SingleDriverLogStore checks that N.json is absent and then writes it without a
 * condition, under a lock of its own JVM: two drivers can both write N.json, and the later one
 * silently replaces the earlier commit (delta-io/delta#1830). Here the check and the write are
 * one request, made through S3A's conditional create (HADOOP-19256).
 *
 * <p>A writer that loses the race gets java.nio.file.FileAlreadyExistsException, on which Delta
 * checks the winner's commit for conflicts and retries at the next version, as on HDFS. When a
 * write is refused because N.json exists with exactly the bytes this writer sent, the refused
 * request was a retry of this writer's own write, whose first answer was lost: the commit is
 * this writer's, and it succeeds rather than being made again at N+1 (which would add its
 * files twice).
 *
 * <p>Files Delta writes with overwrite (_last_checkpoint) are plain PUTs. A PUT is visible whole
 * or not at all, so no partial file is ever seen.
 */
public class ConditionalPutLogStore extends HadoopFileSystemLogStore {
  /** How often a write is tried again when S3 answers 409: another conditional write of the
   * same key was in flight, and neither is known to have won. */
  static final int CONFLICT_ATTEMPTS = 5;

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
    for (int attempt = 1; ; attempt++) {
      try {
        putIfAbsent(fs, path, bytes);
        return;
      } catch (RemoteFileChangedException | org.apache.hadoop.fs.FileAlreadyExistsException e) {
        if (Arrays.equals(readOrNull(fs, path), bytes)) {
          return; // this writer's own earlier attempt
        }
        java.nio.file.FileAlreadyExistsException lost =
            new java.nio.file.FileAlreadyExistsException(path.toString());
        lost.initCause(e);
        throw lost;
      } catch (AWSServiceIOException e) {
        if (e.statusCode() != 409 || attempt >= CONFLICT_ATTEMPTS) {
          throw e;
        }
        sleep(100L * attempt);
      }
    }
  }

  @Override
  public Boolean isPartialWriteVisible(Path path, Configuration conf) {
    return false;
  }

  private static void putIfAbsent(FileSystem fs, Path path, byte[] bytes) throws IOException {
    // must(), not opt(): a file system that cannot write conditionally refuses the create
    // instead of writing without the condition.
    FSDataOutputStreamBuilder<?, ?> create = fs.createFile(path);
    create.overwrite(false);
    create.must(Options.CreateFileOptionKeys.FS_OPTION_CREATE_CONDITIONAL_OVERWRITE, true);
    FSDataOutputStream out = create.build();
    try {
      out.write(bytes);
    } finally {
      out.close(); // S3A sends the PUT, and S3 its answer to the condition, here
    }
  }

  private static byte[] readOrNull(FileSystem fs, Path path) throws IOException {
    try (InputStream in = fs.open(path)) {
      return in.readAllBytes();
    } catch (java.io.FileNotFoundException e) {
      return null;
    }
  }

  private static byte[] lines(Iterator<String> actions) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    while (actions.hasNext()) {
      out.write(actions.next().getBytes(StandardCharsets.UTF_8));
      out.write('\n');
    }
    return out.toByteArray();
  }

  private static void sleep(long millis) throws IOException {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.io.InterruptedIOException("interrupted while retrying " + e);
    }
  }
}
