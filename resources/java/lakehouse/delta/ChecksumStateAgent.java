package lakehouse.delta;

import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import java.lang.instrument.Instrumentation;
import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.asm.AsmVisitorWrapper;
import net.bytebuddy.dynamic.ClassFileLocator;
import net.bytebuddy.pool.TypePool;
import org.apache.spark.sql.delta.DeltaLog$;
import org.apache.spark.sql.delta.Snapshot;
import org.apache.spark.sql.delta.VersionChecksum;
import org.apache.spark.sql.delta.actions.SetTransaction;
import org.apache.spark.sql.internal.SQLConf;
import scala.Option;
import scala.collection.immutable.Seq;

/**
 * A Java agent of the Spark driver: a Delta snapshot answers its set transactions, its number of
 * files and its size in bytes from its checksum (the version's N.crc, or the one its writer
 * computed with the commit) instead of rebuilding its whole state with a Spark job over the log.
 *
 * <p>Delta 4.4 answers these three only from that rebuild ({@code Snapshot.computedState}), and
 * asks for them on every streaming-sink batch (the batch's transaction marker,
 * {@code txnVersion}), every MERGE (its metrics) and every read of a new version (its size for
 * the planner), although the checksum written with the commit holds them. delta-io/delta#6929
 * does the same inside Delta, in no release yet; drop this agent with the first release that has
 * it.
 *
 * <p>Each answer falls back to Delta's own path whenever the checksum cannot give it: a version
 * without a checksum (a writer that writes none, a deleted N.crc), a checksum without the set
 * transactions (Delta leaves them out past a hundred, or when it could not compute them), a table
 * whose set transactions expire ({@code delta.setTransactionRetentionDuration}: the rebuild
 * drops the expired ones, a checksum may hold them), and the session setting
 * {@value #SETTING} = false.
 *
 * <p>The advice is written into Delta's own {@code Snapshot} as it loads, by whichever class
 * loader loads it: it names only Delta's, Spark's and Scala's classes, never this agent's.
 */
public final class ChecksumStateAgent {
  static final String SETTING = "spark.lakehouse.delta.stateFromChecksum.enabled";

  private ChecksumStateAgent() {}

  public static void premain(String arguments, Instrumentation instrumentation) {
    new AgentBuilder.Default()
        .disableClassFormatChanges()
        .with(AgentBuilder.Listener.StreamWriting.toSystemError().withErrorsOnly())
        .type(named("org.apache.spark.sql.delta.Snapshot"))
        .transform(
            (builder, type, loader, module, domain) -> {
              // The advice is read from its class file, resolved against Delta's class loader:
              // its methods name Delta's classes, which this agent's loader may not see.
              ClassFileLocator locator =
                  new ClassFileLocator.Compound(
                      ClassFileLocator.ForClassLoader.of(ChecksumStateAgent.class.getClassLoader()),
                      ClassFileLocator.ForClassLoader.of(loader));
              TypePool pool = TypePool.Default.of(locator);
              return builder
                  .visit(advice(pool, locator, "SetTransactions", "setTransactions"))
                  .visit(advice(pool, locator, "FilesAndSize", "numOfFiles"))
                  .visit(advice(pool, locator, "FilesAndSize", "sizeInBytes"));
            })
        .installOn(instrumentation);
  }

  private static AsmVisitorWrapper advice(
      TypePool pool, ClassFileLocator locator, String advice, String method) {
    String name = ChecksumStateAgent.class.getName() + "$" + advice;
    return Advice.to(pool.describe(name).resolve(), locator)
        .on(named(method).and(takesArguments(0)));
  }

  /** {@code Snapshot.setTransactions}: the checksum's, unless the table's expire. */
  public static final class SetTransactions {
    @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class)
    static Seq<SetTransaction> enter(@Advice.This Snapshot snapshot) {
      if (!"true".equals(SQLConf.get().getConfString(SETTING, "true"))) {
        return null;
      }
      Option<VersionChecksum> checksum = snapshot.checksumOpt();
      if (checksum.isEmpty()
          || DeltaLog$.MODULE$.minSetTransactionRetentionInterval(snapshot.metadata()).nonEmpty()) {
        return null;
      }
      Option<Seq<SetTransaction>> known = checksum.get().setTransactions();
      return known.isDefined() ? known.get() : null;
    }

    @Advice.OnMethodExit
    static void exit(
        @Advice.Enter Seq<SetTransaction> known,
        @Advice.Return(readOnly = false) Seq<SetTransaction> returned) {
      if (known != null) {
        returned = known;
      }
    }
  }

  /** {@code Snapshot.numOfFiles} and {@code Snapshot.sizeInBytes}: the checksum's. */
  public static final class FilesAndSize {
    @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class)
    static Long enter(@Advice.This Snapshot snapshot, @Advice.Origin("#m") String method) {
      if (!"true".equals(SQLConf.get().getConfString(SETTING, "true"))) {
        return null;
      }
      Option<VersionChecksum> checksum = snapshot.checksumOpt();
      if (checksum.isEmpty()) {
        return null;
      }
      VersionChecksum known = checksum.get();
      return "numOfFiles".equals(method) ? known.numFiles() : known.tableSizeBytes();
    }

    @Advice.OnMethodExit
    static void exit(@Advice.Enter Long known, @Advice.Return(readOnly = false) long returned) {
      if (known != null) {
        returned = known;
      }
    }
  }
}
