package lakehouse.s3;

import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.AWSServiceIOException;
import org.apache.hadoop.fs.s3a.RemoteFileChangedException;

/**
 * Creating a file on S3 only if it is absent, as one request ("If-None-Match: *", through S3A's
 * conditional create, HADOOP-19256): of writers racing to create one file, S3 lets one win,
 * whichever application, process or engine they run in. Both the Delta log store and the
 * streaming checkpoint's file manager create their files so.
 */
public final class ConditionalPut {
  /** How often a write is tried again when S3 answers 409: another conditional write of the
   * same key was in flight, and neither is known to have won. */
  static final int CONFLICT_ATTEMPTS = 5;

  private ConditionalPut() {}

  /**
   * Write {@code bytes} to {@code path} if no file is there.
   *
   * <p>When the file exists with exactly these bytes, the refused request was a retry of this
   * writer's own write, whose first answer was lost: the file is this writer's, and the call
   * succeeds.
   *
   * @throws FileAlreadyExistsException another writer created the file first
   */
  public static void create(FileSystem fs, Path path, byte[] bytes) throws IOException {
    for (int attempt = 1; ; attempt++) {
      try {
        putIfAbsent(fs, path, bytes);
        return;
      } catch (RemoteFileChangedException | FileAlreadyExistsException e) {
        if (Arrays.equals(readOrNull(fs, path), bytes)) {
          return; // this writer's own earlier attempt
        }
        FileAlreadyExistsException lost = new FileAlreadyExistsException(path.toString());
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

  private static void sleep(long millis) throws IOException {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.io.InterruptedIOException("interrupted while retrying " + e);
    }
  }
}
