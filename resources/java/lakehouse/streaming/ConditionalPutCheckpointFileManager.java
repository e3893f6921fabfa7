package lakehouse.streaming;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import lakehouse.s3.ConditionalPut;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager;

/**
 * The streaming checkpoint's file manager, whose files on S3 (s3a://) are created only if absent,
 * with S3's conditional write ({@link ConditionalPut}).
 *
 * <p>A stream's checkpoint records each batch's offsets (offsets/N) before the batch runs, and the
 * batch as done (commits/N) after; its first run records the query id (metadata). Spark refuses
 * to run a batch whose offsets another run already recorded ("Concurrent update to the log"), but
 * on S3 its default manager checks that offsets/N is absent and then copies it there: two Spark
 * applications running one stream at once could both record batch N, each with its own offsets.
 * Delta's sink commits a batch once per (query id, batch id), so one of the two batches would be
 * dropped, and the records only it held with it. Here S3 lets one of the two create offsets/N;
 * the other application's run fails with Spark's concurrent-update error, before it reads a
 * record. Other schemes, and files written with overwrite, are written as Spark writes them.
 */
public class ConditionalPutCheckpointFileManager extends FileContextBasedCheckpointFileManager {
  private final Configuration hadoopConf;

  public ConditionalPutCheckpointFileManager(Path path, Configuration hadoopConf) {
    super(path, hadoopConf);
    this.hadoopConf = hadoopConf;
  }

  @Override
  public CheckpointFileManager.CancellableFSDataOutputStream createAtomic(
      Path path, boolean overwriteIfPossible) {
    String scheme = path.toUri().getScheme();
    if (overwriteIfPossible || !"s3a".equals(scheme)) {
      return super.createAtomic(path, overwriteIfPossible);
    }
    return new PutIfAbsentStream(path, hadoopConf);
  }

  /** Holds what is written, and creates the file with it at close (unless cancelled). */
  private static final class PutIfAbsentStream
      extends CheckpointFileManager.CancellableFSDataOutputStream {
    private final Path path;
    private final Configuration hadoopConf;
    private final ByteArrayOutputStream buffer;
    private boolean finished;

    PutIfAbsentStream(Path path, Configuration hadoopConf) {
      this(path, hadoopConf, new ByteArrayOutputStream());
    }

    private PutIfAbsentStream(Path path, Configuration hadoopConf, ByteArrayOutputStream buffer) {
      super(buffer);
      this.path = path;
      this.hadoopConf = hadoopConf;
      this.buffer = buffer;
    }

    @Override
    public synchronized void close() throws IOException {
      if (finished) {
        return;
      }
      finished = true;
      super.close();
      // Spark catches Hadoop's FileAlreadyExistsException: another run recorded this file.
      ConditionalPut.create(path.getFileSystem(hadoopConf), path, buffer.toByteArray());
    }

    @Override
    public synchronized void cancel() {
      finished = true; // nothing was sent: there is nothing to remove
    }
  }
}
